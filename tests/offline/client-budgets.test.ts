/**
 * A run budget's 429 (`*_budget_exceeded`) is the run's limit, not the server's load: the TypeScript and Python clients
 * answer it at once instead of sending the request again, which would spend the budget again (a rollout's judge calls)
 * or wait out Retry-After for nothing. A `rate_limited` 429 is still retried.
 */
import { execFile } from 'node:child_process'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import path from 'node:path'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { RewardClient, RewardHarnessError } from '../../src/client/index.ts'

const ROOT = path.join(import.meta.dirname, '../..')
const METADATA = { high_level_goal: 'math', model_size: '7B', current_step: 0, total_steps: 1 }
const REFUSAL = {
  error: {
    code: 'judge_budget_exceeded',
    message: 'judging the rollout spent 8 LLM calls, this run’s budgets.judge_calls_per_rollout, …',
    details: { budget: 'budgets.judge_calls_per_rollout', limit: 8, calls: 8 },
  },
  request_id: 'req-1',
}

/** A fetch that answers each call with the next of `answers` and counts the calls. */
function scripted(answers: { status: number; body: unknown }[]) {
  let calls = 0
  const fetch = async () => {
    const next = answers[Math.min(calls++, answers.length - 1)]!
    return new Response(JSON.stringify(next.body), {
      status: next.status,
      headers: { 'content-type': 'application/json', 'retry-after': '0' },
    })
  }
  return { fetch: fetch as typeof globalThis.fetch, calls: () => calls }
}

describe('the TypeScript client', () => {
  it("throws a budget's 429 at once, with its code, after one request", async () => {
    const server = scripted([{ status: 429, body: REFUSAL }])
    const client = new RewardClient({ baseUrl: 'http://rh.test', fetch: server.fetch })
    const error = await client.scoreAsync({ id: 'r1', input: 'q', output: 'a' }, METADATA).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(RewardHarnessError)
    expect(error).toMatchObject({ status: 429, code: 'judge_budget_exceeded' })
    expect(server.calls()).toBe(1)
  })

  it('still retries a rate_limited 429', async () => {
    const server = scripted([
      { status: 429, body: { error: { code: 'rate_limited', message: 'slow down' } } },
      { status: 200, body: { score: 0.5 } },
    ])
    const client = new RewardClient({ baseUrl: 'http://rh.test', fetch: server.fetch })
    expect(await client.scoreAsync({ id: 'r1', input: 'q', output: 'a' }, METADATA)).toEqual({ score: 0.5 })
    expect(server.calls()).toBe(2)
  })
})

describe('the Python client', () => {
  it("raises a budget's 429 at once, with its code and details, after one request", async () => {
    let requests = 0
    const server = createServer((req: IncomingMessage, res: ServerResponse) => {
      requests++
      req.resume()
      res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '30' })
      res.end(JSON.stringify({ ...REFUSAL, error: { ...REFUSAL.error, code: 'update_budget_exceeded' } }))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
      const code = [
        'import json, sys',
        'from reward_harness_client import RewardHarnessClient, RewardHarnessError',
        'try:',
        '    RewardHarnessClient(sys.argv[1]).rollouts_complete()',
        'except RewardHarnessError as e:',
        '    print(json.dumps({"status": e.status, "code": e.code}))',
      ].join('\n')
      const { stdout } = await promisify(execFile)('python3', ['-c', code, base], {
        timeout: 30_000,
        env: { ...process.env, PYTHONPATH: path.join(ROOT, 'clients/python'), PYTHONDONTWRITEBYTECODE: '1' },
      })
      expect(JSON.parse(stdout.trim())).toEqual({ status: 429, code: 'update_budget_exceeded' })
      expect(requests).toBe(1)
    } finally {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  })
})
