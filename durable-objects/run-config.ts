import { env } from 'cloudflare:workers'
import { eq } from 'drizzle-orm'
import { drizzle } from 'drizzle-orm/d1'
import { LRUCache } from 'lru-cache'
import defaultRunJson from '../config/default-run.json'
import { redactStored } from '../src/credentials/literal.ts'
import { runs } from '../src/db/schema.ts'
import { AgentSettings, RunConfig } from '../src/schemas/run-config.ts'
import { parseStored } from '../src/schemas/strict.ts'

export const DEFAULT_RUN_ID = 'default'

let defaultRun: RunConfig | undefined
/** Run configs never change after creation, so an isolate may keep them. */
const cache = new LRUCache<string, RunConfig>({ max: 1_000 })

/**
 * A run's config: the checked-in default run, or a run created through `POST /runs`.
 * @example const config = await loadRunConfig(env.DB, 'default')
 */
export async function loadRunConfig(db: D1Database, runId: string): Promise<RunConfig | undefined> {
  if (runId === DEFAULT_RUN_ID) return (defaultRun ??= defaultRunConfig(env))
  const cached = cache.get(runId)
  if (cached) return cached
  const row = await drizzle(db).select({ config: runs.config }).from(runs).where(eq(runs.id, runId)).get()
  if (!row) return undefined
  // Stored by any earlier version: a key since removed must not lock the run out.
  const config = parseStored(RunConfig, redactStored('run', runId, row.config))
  cache.set(runId, config)
  return config
}

/**
 * Vars that only `npm start -- --judge local` sets (`wrangler dev --var`), so wrangler.toml and the generated Env type
 * do not declare them: the base URL and model id of the local judge (`npm run judge:local`).
 */
interface LocalJudgeVars {
  DEPLOYMENT?: string
  LOCAL_JUDGE_URL?: string
  LOCAL_JUDGE_MODEL?: string
}

/**
 * The agents of a run on the local judge, when `npm start -- --judge local` named one: every role on it, two calls
 * at a time (its two slots) and the longest timeout (on two shared cores a judgement takes seconds to a minute, and a
 * call the server has queued spends its timeout waiting). Honoured only where DEPLOYMENT is local, so a stray var can
 * never point a deployment's runs at loopback.
 * @example localJudgeAgents({ DEPLOYMENT: 'local', LOCAL_JUDGE_URL: 'http://127.0.0.1:8090/v1' })?.default.backend
 *   // 'openai'
 */
export function localJudgeAgents(vars: LocalJudgeVars): RunConfig['agents'] | undefined {
  if (vars.DEPLOYMENT !== 'local' || !vars.LOCAL_JUDGE_URL) return undefined
  const judge = {
    backend: 'openai',
    base_url: vars.LOCAL_JUDGE_URL,
    model: vars.LOCAL_JUDGE_MODEL || 'local',
    // The server's grammar holds a judge's reply to its schema; asked for any JSON, a 135M model rambles.
    structured_output: 'json_schema',
    concurrency: 2,
    timeout_ms: 300_000,
  }
  return { default: AgentSettings.parse(judge) }
}

/**
 * How runs on the local judge judge, unless they say: llama.cpp's server sends `top_logprobs`, and a small model's
 * probability of Yes keeps the signal its JSON grades lose (BENCHMARKS.md, gsm8k: 95 % against 55 % through `/score`).
 */
export const LOCAL_JUDGING = 'verdicts' as const

/**
 * The checked-in default run; its agents are {@link localJudgeAgents} when there is a local judge, and then it judges
 * by verdicts ({@link LOCAL_JUDGING}) and its idle
 * gap is the judge's timeout: on two cores one rollout's judgement takes 7–36 s, so a 30 s gap counted from the last
 * arrival closed a step while its rollouts were still being judged.
 * @example defaultRunConfig({ DEPLOYMENT: 'local', LOCAL_JUDGE_URL: 'http://127.0.0.1:8090/v1',
 *   LOCAL_JUDGE_MODEL: 'smollm2-135m' }).agents.default.backend // 'openai'
 * @internal
 */
export function defaultRunConfig(vars: LocalJudgeVars): RunConfig {
  const agents = localJudgeAgents(vars)
  if (!agents) return RunConfig.parse(defaultRunJson)
  const idle = Math.ceil(agents.default.timeout_ms / 1_000)
  return RunConfig.parse({ ...defaultRunJson, agents, close_after_idle_s: idle, judging: LOCAL_JUDGING })
}

/**
 * Keeps a run's config that was just stored, so the isolate that created the run reads no row for it.
 * @example rememberRunConfig('grpo-1', config)
 */
export function rememberRunConfig(runId: string, config: RunConfig): void {
  cache.set(runId, config)
}
