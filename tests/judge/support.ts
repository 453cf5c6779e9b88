import { existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { freePort } from '../../offline/dev/start.ts'
import { judgeHome, startLocalJudge, type LocalJudge } from '../../offline/judge-local/index.ts'

/**
 * The real local judge (`npm run judge:local`) on a free port, for one test file. A missing install fails the file
 * with the command that installs it: the first install compiles llama.cpp for minutes, which a test run must not
 * start on its own, and a judge test never skips.
 * @example const judge = await startInstalledJudge(); … judge.server.kill('SIGINT')
 */
export async function startInstalledJudge(): Promise<LocalJudge> {
  const home = judgeHome()
  const venv = existsSync(join(home, 'venv', 'bin', 'python'))
  const model = existsSync(join(home, 'models')) && readdirSync(join(home, 'models')).some((f) => f.endsWith('.gguf'))
  if (!venv || !model)
    throw new Error(
      `the local judge is not installed in ${home} (${venv ? 'no model' : 'no venv'}): run ` +
        '`npm run judge:local -- --install-only` first (the first install compiles llama.cpp: minutes)',
    )
  return startLocalJudge({ port: await freePort() })
}

/**
 * Settings of a role on the real judge: one call at a time (the server decodes one request at a time), the longest
 * timeout, and short replies, so that a model that rambles in JSON costs seconds, not minutes.
 * @example agents: { default: onJudge(judge, { structured_output: 'json_schema' }) }
 */
export function onJudge(judge: LocalJudge, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    backend: 'openai',
    base_url: judge.url,
    model: judge.model,
    timeout_ms: 300_000,
    max_attempts: 2,
    concurrency: 1,
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
