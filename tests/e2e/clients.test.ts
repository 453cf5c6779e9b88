/**
 * The clients a trainer uses, against a real `wrangler dev` and its default run (open locally):
 * plain curl, the TypeScript RewardClient, and the stdlib Python client in clients/python.
 */
import { execFile } from 'node:child_process'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { readFile } from 'node:fs/promises'
import path from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest'
import { RewardClient } from '../../src/client/index.ts'
import { callJson, METADATA } from './support/http.ts'
import { startWranglerDev, type WranglerDev } from './support/wrangler-dev.ts'

const run = promisify(execFile)
const ROOT = path.join(import.meta.dirname, '../..')
const PYTHON_DIR = path.join(ROOT, 'clients/python')

/**
 * The README's curl example for `POST /score` on the default run (its lines up to the `# →` line), and the answer it
 * documents on that line. Read from README.md so the test fails when the README drifts from what the Worker does.
 */
async function readmeScoreExample(): Promise<{ command: string; documented: string }> {
  const lines = (await readFile(path.join(ROOT, 'README.md'), 'utf8')).split('\n')
  const index = lines.findIndex((line) => /^curl\b.*\/score\b/.test(line) && !/authorization/i.test(line))
  expect(index, 'README.md has a `curl … /score …` example for the default run').toBeGreaterThanOrEqual(0)
  const answer = lines.findIndex((line, at) => at > index && /^#\s*→/.test(line))
  return {
    command: lines.slice(index, answer).join('\n'),
    documented: lines[answer]?.match(/^#\s*→\s*(.*)$/)?.[1] ?? '',
  }
}

let dev: WranglerDev

beforeAll(async () => {
  dev = await startWranglerDev()
})

afterAll(async () => {
  await dev?.stop()
})

/** Each test starts on an empty collecting step: close whatever an earlier test left open and wait for its update. */
beforeEach(async () => {
  const closed = await callJson(`${dev.baseUrl}/complete`, { method: 'POST', body: {} })
  expect(closed.status).toBe(200)
  const waited = await callJson(`${dev.baseUrl}/rubric_status/wait?timeout_s=30`, { timeoutMs: 40_000 })
  expect(waited.status, `${JSON.stringify(waited.body)}\n${dev.logs()}`).toBe(200)
})

/** Runs Python code (a file or `-c` source) with the client directory importable; returns stdout parsed as JSON. */
async function python(args: string[]): Promise<any> {
  const { stdout } = await run('python3', args, {
    cwd: ROOT,
    timeout: 60_000,
    env: { ...process.env, PYTHONPATH: PYTHON_DIR, PYTHONDONTWRITEBYTECODE: '1' },
  })
  const lastLine = stdout.trim().split('\n').at(-1) ?? ''
  return JSON.parse(lastLine)
}

describe('curl', () => {
  it('runs the README example with the real curl binary: a score in [0,1] and a rubric version', async () => {
    const { command, documented } = await readmeScoreExample()
    expect(command).toContain('127.0.0.1:8787')
    const local = command
      .replace(/^curl /, 'curl -s --fail-with-body ')
      .replaceAll('127.0.0.1:8787', new URL(dev.baseUrl).host)
    const { stdout } = await run('sh', ['-c', local], { timeout: 30_000 })
    const result = JSON.parse(stdout)
    const sent = JSON.parse(command.match(/-d '(\{[\s\S]*\})'/)![1]!)
    expect(result.score).toBeGreaterThanOrEqual(0)
    expect(result.score).toBeLessThanOrEqual(1)
    expect(Number.isInteger(result.rubric_version) && result.rubric_version >= 1).toBe(true)
    expect(result).toMatchObject({
      run_id: 'default',
      rollout_id: sent.rollout.id,
      instance_id: 'global',
      duplicate: false,
    })
    // Every field the README shows in its sample answer is in the real one.
    const documentedKeys = [...documented.matchAll(/"(\w+)":/g)].map((m) => m[1]!)
    expect(documentedKeys).toContain('score')
    for (const key of new Set(documentedKeys.filter((k) => k !== 'rubric_id' && k !== 'grade' && k !== 'weight')))
      expect(result).toHaveProperty(key)
    for (const criterion of result.criteria)
      expect(Object.keys(criterion)).toEqual(expect.arrayContaining(['rubric_id', 'grade', 'weight']))

    const rubrics = await callJson(`${dev.baseUrl}/rubrics`)
    expect(rubrics.status).toBe(200)
    expect(result.rubric_version).toBe(rubrics.body.rubric_version)
    expect(result.criteria.map((c: { rubric_id: string }) => c.rubric_id)).toEqual(
      [...rubrics.body.anchor_rubrics, ...rubrics.body.adaptive_rubrics].map((r: { id: string }) => r.id),
    )
  })
})

describe('TypeScript RewardClient', () => {
  it('scores rollouts, completes the step and sees the update; a duplicate id gets the first score back', async () => {
    const client = new RewardClient({ baseUrl: dev.baseUrl, timeoutMs: 30_000 })
    const rollouts = [
      { id: 'ts-1', input: 'What is 6*7?', output: '6 * 7 = 42', supplemental_context: '42' },
      { id: 'ts-2', input: 'What is 10-3?', output: '10 - 3 = 7', supplemental_context: '7' },
      {
        id: 'ts-3',
        input: 'Name the capital of France.',
        output: 'Paris is the capital of France.',
        supplemental_context: 'Paris',
      },
    ]
    const results = await Promise.all(rollouts.map((rollout) => client.scoreAsync(rollout, METADATA)))
    const step = results[0]!.step
    for (const [index, result] of results.entries()) {
      expect(result).toMatchObject({ rollout_id: rollouts[index]!.id, step, duplicate: false, run_id: 'default' })
      expect(result.score).toBeGreaterThan(0)
      expect(result.score).toBeLessThanOrEqual(1)
    }

    // Same id, same step: the first score comes back even though the answer is now empty (which grades 0).
    const again = await client.scoreAsync(rollouts[0]!, METADATA)
    const altered = await client.scoreAsync({ ...rollouts[0]!, output: '' }, METADATA)
    for (const duplicate of [again, altered]) {
      expect(duplicate).toMatchObject({
        rollout_id: 'ts-1',
        step,
        duplicate: true,
        score: results[0]!.score,
        rubric_version: results[0]!.rubric_version,
      })
    }

    // The ledger shards report their counts within a second.
    await vi.waitFor(
      async () =>
        expect(await client.rubricStatus()).toMatchObject({
          run_id: 'default',
          step,
          status: 'collecting',
          rollouts: 3,
        }),
      { timeout: 10_000, interval: 100 },
    )
    expect(await client.rolloutsComplete()).toEqual({ status: 'complete', step, closed: true })
    const updated = await client.rubricUpdated(60)
    expect(updated).toMatchObject({ status: 'updated', step, rollouts: 3, pending: 0 })
    expect(updated.timed_out).toBeUndefined()
  })
})

describe('Python client', () => {
  it('runs clients/python/example.py: two scores, the step closed, the update seen', async () => {
    const before = await callJson(`${dev.baseUrl}/rubric_status`)
    const output = await python([path.join(PYTHON_DIR, 'example.py'), dev.baseUrl])
    expect(output.error).toBeUndefined()
    expect(output.scores.map((s: { rollout_id: string }) => s.rollout_id)).toEqual(['py-demo-right', 'py-demo-wrong'])
    for (const s of output.scores) {
      expect(s.score).toBeGreaterThanOrEqual(0)
      expect(s.score).toBeLessThanOrEqual(1)
      expect(s.duplicate).toBe(false)
    }
    const step = output.scores[0].step
    expect(step).toBeGreaterThan(before.body.step)
    expect(output.complete).toEqual({ status: 'complete', step, closed: true })
    expect(output.updated).toMatchObject({ run_id: 'default', status: 'updated', step, rollouts: 2 })
    expect(output.updated.timed_out).toBeUndefined()
    // The server agrees with what the script printed.
    expect((await callJson(`${dev.baseUrl}/rubric_status`)).body).toMatchObject({
      step,
      status: 'updated',
      rollouts: 2,
    })
  })

  it('addresses a token run by run_id, and raises errors that carry the server code', async () => {
    const created = await callJson(`${dev.baseUrl}/runs`, {
      token: dev.adminToken,
      body: { config: { anchor_rubrics: [{ text: 'The answer is correct.' }] } },
    })
    expect(created.status).toBe(201)
    const defaultBefore = (await callJson(`${dev.baseUrl}/rubric_status`)).body
    const code = `
import json, sys
from reward_harness_client import RewardHarnessClient, RewardHarnessError
base, run_id, token = sys.argv[1:4]
meta = {"high_level_goal": "math", "model_size": "7B", "current_step": 0, "total_steps": 10}
out = {}
def attempt(name, fn):
    try:
        out[name] = {"ok": fn()}
    except RewardHarnessError as e:
        out[name] = {"status": e.status, "code": e.code, "message": e.message}
attempt(
    "scored",
    lambda: RewardHarnessClient(base, token=token, run_id=run_id).score_async(
        {"id": "p1", "input": "1+1?", "output": "2"}, meta
    ),
)
attempt("no_token", lambda: RewardHarnessClient(base, run_id=run_id).rubric_status())
attempt("bad_rollout", lambda: RewardHarnessClient(base).score_async({"id": "", "input": "x"}, meta))
attempt("no_run", lambda: RewardHarnessClient(base, run_id="no-such-run").rubric_status())
print(json.dumps(out))
`
    const out = await python(['-c', code, dev.baseUrl, created.body.run_id, created.body.token])
    expect(out.scored.ok).toMatchObject({ run_id: created.body.run_id, rollout_id: 'p1', duplicate: false })
    expect(out.no_token).toMatchObject({ status: 401, code: 'unauthorized' })
    expect(out.bad_rollout).toMatchObject({ status: 400, code: 'invalid_request' })
    expect(out.no_run).toMatchObject({ status: 404, code: 'run_not_found' })
    for (const failure of [out.no_token, out.bad_rollout, out.no_run]) expect(failure.message.length).toBeGreaterThan(0)
    // The run token's run counted the rollout; the default run did not.
    await vi.waitFor(
      async () =>
        expect((await callJson(`${dev.baseUrl}/rubric_status`, { token: created.body.token })).body).toMatchObject({
          run_id: created.body.run_id,
          rollouts: 1,
        }),
      { timeout: 10_000, interval: 100 },
    )
    expect((await callJson(`${dev.baseUrl}/rubric_status`)).body).toEqual(defaultBefore)
  })

  it('retries 429 and 503 honouring Retry-After, loops on 202 while waiting, and does not retry a 500', async () => {
    // A scripted server stands in for the Worker here: the real one cannot be made to answer 429 on demand.
    const script: Record<string, { status: number; headers?: Record<string, string>; body: unknown }[]> = {
      'POST /score': [
        {
          status: 429,
          headers: { 'retry-after': '1' },
          body: { error: { code: 'rate_limited', message: 'slow down' } },
        },
        {
          status: 503,
          headers: { 'retry-after': '0' },
          body: { error: { code: 'llm_unavailable', message: 'try again' } },
        },
        { status: 200, body: { score: 0.5, rollout_id: 'x' } },
      ],
      'GET /rubric_status/wait': [
        { status: 202, body: { status: 'updating', timed_out: true } },
        { status: 200, body: { status: 'updated' } },
      ],
      'POST /complete': [{ status: 500, body: { error: { code: 'internal', message: 'boom' }, request_id: 'req-1' } }],
    }
    const seen: { key: string; at: number; authorization: string | undefined }[] = []
    const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
      const key = `${req.method} ${new URL(req.url ?? '/', 'http://x').pathname}`
      seen.push({ key, at: Date.now(), authorization: req.headers.authorization })
      const next = script[key]?.shift() ?? { status: 404, body: { error: { code: 'not_found', message: key } } }
      req.resume()
      res.writeHead(next.status, { 'content-type': 'application/json', ...next.headers })
      res.end(JSON.stringify(next.body))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
      const code = `
import json, sys, time
from reward_harness_client import RewardHarnessClient, RewardHarnessError
client = RewardHarnessClient(sys.argv[1], token="tok-1")
out = {}
started = time.monotonic()
out["score"] = client.score_async(
    {"id": "x", "input": "q", "output": "a"},
    {"high_level_goal": "g", "model_size": "7B", "current_step": 0, "total_steps": 1},
)
out["score_s"] = time.monotonic() - started
out["updated"] = client.rubric_updated(timeout_s=30)
try:
    client.rollouts_complete()
except RewardHarnessError as e:
    out["complete_error"] = {"status": e.status, "code": e.code, "request_id": e.request_id}
print(json.dumps(out))
`
      const out = await python(['-c', code, base])
      expect(out.score).toEqual({ score: 0.5, rollout_id: 'x' })
      const scoreCalls = seen.filter((s) => s.key === 'POST /score')
      expect(scoreCalls).toHaveLength(3)
      expect(scoreCalls[1]!.at - scoreCalls[0]!.at).toBeGreaterThanOrEqual(950)
      expect(out.score_s).toBeGreaterThanOrEqual(0.95)
      expect(scoreCalls.every((s) => s.authorization === 'Bearer tok-1')).toBe(true)
      expect(out.updated).toEqual({ status: 'updated' })
      expect(seen.filter((s) => s.key === 'GET /rubric_status/wait')).toHaveLength(2)
      expect(out.complete_error).toEqual({ status: 500, code: 'internal', request_id: 'req-1' })
      expect(seen.filter((s) => s.key === 'POST /complete')).toHaveLength(1)
    } finally {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  })
})
