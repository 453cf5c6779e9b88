/**
 * `npx tsx bench/score-micro.ts`: CPU cost of each pure-compute step of POST /score, measured in Node
 * (same V8 engine as workerd, but precise timers and no shared event loop) with zod in jitless mode as
 * in Workers (zod cannot compile validators there: `new Function` is refused). Complements
 * bench/score-throughput.ts, which measures the whole /score end to end but through noise.
 */
import { z } from 'zod'
import { buildScorerRequest, judgementKey, parseScorerReply } from '../src/agents/scorer/index.ts'
import { canonicalJson, sha256Hex } from '../src/hash/index.ts'
import { MockChatModel } from '../src/llm/mock.ts'
import { initialRubrics } from '../src/rubrics/index.ts'
import { ScoreRequest } from '../src/schemas/rollout.ts'
import { agentSettingsFor, RunConfig } from '../src/schemas/run-config.ts'
import { requestModels } from '../workers/scoring/models.ts'
import type { Env } from '../workers/env.ts'
import { injectionTactics } from '../src/analysis/index.ts'
import { nextScoreBody, stubRunConfig } from './harness.ts'

z.config({ jitless: true })

export interface MicroResult {
  name: string
  /** Microseconds per call: the fastest of the repetitions. */
  us: number
}

/**
 * Times `fn` (sync or async) for about `ms` milliseconds, `reps` times, and keeps the fastest µs per call.
 * @example const us = await timeIt(() => JSON.parse(body))
 */
export async function timeIt(fn: () => unknown, ms = 150, reps = 3): Promise<number> {
  for (let i = 0; i < 200; i++) await fn()
  let best = Number.POSITIVE_INFINITY
  for (let rep = 0; rep < reps; rep++) {
    let calls = 0
    const started = performance.now()
    while (performance.now() - started < ms) {
      for (let i = 0; i < 50; i++) await fn()
      calls += 50
    }
    best = Math.min(best, ((performance.now() - started) * 1_000) / calls)
  }
  return best
}

/**
 * Measures every step and returns µs per call.
 * @example const results = await runMicro()
 */
export async function runMicro(): Promise<MicroResult[]> {
  const body = nextScoreBody('micro', 1200)
  const raw = JSON.parse(body) as unknown
  const request = ScoreRequest.parse(raw)
  const mockConfig = RunConfig.parse(stubRunConfig())
  const rubrics = initialRubrics(mockConfig, 'global', new Date().toISOString())
  const scorerInput = {
    rubrics,
    rollout: request.rollout,
    metadata: request.metadata,
    gradeMax: 10,
    locale: 'en' as const,
    prompts: mockConfig.prompts,
  }
  const chatRequest = await buildScorerRequest(scorerInput)
  const mock = new MockChatModel()
  const reply = (await mock.complete(chatRequest)).text
  const env = {} as Env
  const criteria = parseScorerReply(reply, rubrics, 10)
  const steps: [string, () => unknown][] = [
    ['JSON.parse of the body', () => JSON.parse(body)],
    ['ScoreRequest.safeParse (zod, jitless)', () => ScoreRequest.safeParse(raw)],
    ['agentSettingsFor (zod parse per request)', () => agentSettingsFor(mockConfig, 'scorer')],
    ['requestModels + forRole(scorer)', () => requestModels(env, mockConfig).forRole('scorer')],
    [
      'judgementKey (canonicalJson + sha256)',
      () => judgementKey('mock:x|{}', 'en', 10, request.rollout, request.metadata, mockConfig.prompts),
    ],
    ['sha256Hex of the rollout text', () => sha256Hex(`${request.rollout.input}\u0000${request.rollout.output}`)],
    ['canonicalJson of the agent settings', () => canonicalJson(agentSettingsFor(mockConfig, 'scorer'))],
    ['buildScorerRequest (boundary sha256 + render)', () => buildScorerRequest(scorerInput)],
    ['MockChatModel.complete (mock heuristics)', () => mock.complete(chatRequest)],
    ['parseScorerReply (JSON + zod)', () => parseScorerReply(reply, rubrics, 10)],
    [
      'JSON.stringify of the response',
      () =>
        JSON.stringify({ score: 0.7, criteria, rollout_id: request.rollout.id, request_id: 'x', run_id: 'default' }),
    ],
    ['injectionTactics (the cheap check on every output)', () => injectionTactics(request.rollout.output)],
  ]
  const results: MicroResult[] = []
  for (const [name, fn] of steps) results.push({ name, us: await timeIt(fn) })
  return results
}

if (process.argv[1]?.endsWith('score-micro.ts')) {
  runMicro()
    .then((results) => {
      console.log(
        `Pure-compute steps of /score in Node ${process.version} (zod jitless, as in Workers), µs per call, fastest ` +
          `of 3:`,
      )
      for (const { name, us } of results) console.log(`  ${name.padEnd(64)} ${us.toFixed(1).padStart(8)} µs`)
    })
    .catch((error: unknown) => {
      console.error(error)
      process.exit(1)
    })
}
