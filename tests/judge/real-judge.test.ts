/**
 * One `/score` on a run whose scorer is a real model: SmolLM2-135M on llama-cpp-python's server, started here on a
 * free port by the project's own `startLocalJudge` (what `npm run judge:local` runs). A missing install fails the file
 * with the command that installs it; nothing is skipped.
 */
import { existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { freePort } from '../../offline/dev/start.ts'
import { judgeHome, startLocalJudge, type LocalJudge } from '../../offline/judge-local/index.ts'
import { callJson, METADATA } from '../e2e/support/http.ts'
import { startWranglerDev, type WranglerDev } from '../e2e/support/wrangler-dev.ts'

/** One call of a slow model on a loaded 2-core machine can take minutes (docs/local-judge.md). */
const JUDGE_TIMEOUT_MS = 300_000

let judge: LocalJudge
let dev: WranglerDev

/**
 * Throws, naming the install command, when the judge's venv or model is missing: installing compiles llama.cpp for
 * many minutes, which a test run must not start on its own.
 */
function requireInstalledJudge(): void {
  const home = judgeHome()
  const venv = existsSync(join(home, 'venv', 'bin', 'python'))
  const model = existsSync(join(home, 'models')) && readdirSync(join(home, 'models')).some((f) => f.endsWith('.gguf'))
  if (!venv || !model)
    throw new Error(
      `the local judge is not installed in ${home} (${venv ? 'no model' : 'no venv'}): run ` +
        '`npm run judge:local -- --install-only` first (the first install compiles llama.cpp: minutes)',
    )
}

beforeAll(async () => {
  requireInstalledJudge()
  judge = await startLocalJudge({ port: await freePort() })
  dev = await startWranglerDev()
}, 180_000)

afterAll(async () => {
  await dev?.stop()
  judge?.server.kill('SIGINT')
})

describe('the real judge in the loop', () => {
  it('scores a rollout in [0, 1] with token counts from the server’s usage in /llm_calls', async () => {
    const created = await callJson(`${dev.baseUrl}/runs`, {
      token: dev.adminToken,
      body: {
        config: {
          anchor_rubrics: [{ text: 'The final answer is correct.' }],
          grade_max: 4,
          reasons: 'none',
          agents: {
            scorer: {
              backend: 'openai',
              base_url: judge.url,
              model: judge.model,
              structured_output: 'json_object_schema',
              timeout_ms: JUDGE_TIMEOUT_MS,
              max_attempts: 2,
              concurrency: 1,
            },
          },
        },
      },
    })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    const token = created.body.token as string
    const started = Date.now()
    const scored = await callJson(`${dev.baseUrl}/score`, {
      token,
      body: { rollout: { id: 'real-1', input: 'What is 2+2?', output: '4' }, metadata: METADATA },
      timeoutMs: 2 * JUDGE_TIMEOUT_MS,
    })
    console.log(`/score on the real judge: ${Date.now() - started} ms`, JSON.stringify(scored.body))
    expect(scored.status, JSON.stringify(scored.body)).toBe(200)
    expect(scored.body.score).toBeGreaterThanOrEqual(0)
    expect(scored.body.score).toBeLessThanOrEqual(1)

    const calls = await callJson(`${dev.baseUrl}/llm_calls`, { token })
    expect(calls.status, JSON.stringify(calls.body)).toBe(200)
    const ok = (
      calls.body.calls as {
        role: string
        outcome: string
        calls: number
        prompt_tokens: number
        completion_tokens: number
      }[]
    ).filter((row) => row.role === 'scorer' && row.outcome === 'ok')
    console.log('scorer calls:', JSON.stringify(ok))
    expect(ok.reduce((sum, row) => sum + row.calls, 0)).toBeGreaterThanOrEqual(1)
    // The chat template alone is over 30 tokens; the stub's fixed 100/20 are not what a real server counts.
    const prompt = ok.reduce((sum, row) => sum + row.prompt_tokens, 0)
    const completion = ok.reduce((sum, row) => sum + row.completion_tokens, 0)
    expect(prompt).toBeGreaterThan(30)
    expect(completion).toBeGreaterThan(0)
  })
})
