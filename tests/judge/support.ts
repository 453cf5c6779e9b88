import { existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { freePort } from '../../offline/dev/start.ts'
import { judgeHome, startLocalJudge, type LocalJudge } from '../../offline/judge-local/index.ts'
import { EMBEDDER_MODEL, judgeModel } from '../../offline/judge-local/models.ts'

/**
 * The real local judge (`npm run judge:local`) and its embedder on free ports, for one test file. A missing install
 * fails the file with the command that installs it: a test run never downloads on its own (its network is loopback
 * only in CI), and a judge test never skips.
 * @example const judge = await startInstalledJudge(); … judge.stop()
 */
export async function startInstalledJudge(): Promise<LocalJudge> {
  const home = judgeHome()
  const venv = existsSync(join(home, 'venv', 'bin', 'python'))
  const models = existsSync(join(home, 'models')) ? readdirSync(join(home, 'models')) : []
  const model = [judgeModel().file, EMBEDDER_MODEL.file].every((file) => models.includes(file))
  if (!venv || !model)
    throw new Error(
      `the local judge is not installed in ${home} (${venv ? 'no model' : 'no venv'}): run ` +
        '`npm run judge:local -- --install-only` first (prebuilt wheels and two model files: under a minute)',
    )
  return startLocalJudge({ port: await freePort(), embedderPort: await freePort() })
}

/**
 * Settings of a role on the real judge: two calls at a time (the server's two slots), the longest timeout, and short
 * replies, so that a model that rambles in JSON costs seconds, not minutes.
 * @example agents: { default: onJudge(judge, { structured_output: 'json_schema' }) }
 */
export function onJudge(judge: LocalJudge, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    backend: 'openai',
    base_url: judge.url,
    model: judge.model,
    timeout_ms: 300_000,
    max_attempts: 2,
    concurrency: 2,
    ...extra,
  }
}

/** What `/llm_calls` lists: calls of one role, model and outcome. */
export interface CallGroup {
  role: string
  outcome: string
  calls: number
  prompt_tokens: number
  completion_tokens: number
}
