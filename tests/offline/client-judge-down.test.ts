/**
 * What the Python client's `judge_is_down` makes of an answer, after its retries: the recipes abstain
 * (`REWARD_HARNESS_ABSTAIN=1`) on exactly these and raise on everything else. A gateway's bare 502/503/504 (a
 * proxy's page, wrangler dev's "worker restarted mid-request") is the judge out of reach, like a network failure; a
 * bare 4xx, or the harness's own JSON for a request to fix, is not.
 */
import { execFile } from 'node:child_process'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import path from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const ROOT = path.join(import.meta.dirname, '../..')

/** An answer the loopback server gives to every request on its path: `/<status>/<code or "bare">`. */
function answer(req: IncomingMessage, res: ServerResponse) {
  const [, status, code] = (req.url ?? '').split('/')
  req.resume()
  if (code === 'bare') {
    res.writeHead(Number(status), { 'content-type': 'text/plain', 'retry-after': '0' })
    res.end('Your worker restarted mid-request. Please try sending the request again.')
    return
  }
  res.writeHead(Number(status), { 'content-type': 'application/json', 'retry-after': '0' })
  res.end(JSON.stringify({ error: { code, message: `a ${code} answer` }, request_id: 'req-1' }))
}

const CASES: { status: number; code: string; down: boolean }[] = [
  { status: 502, code: 'bare', down: true },
  { status: 503, code: 'bare', down: true },
  { status: 504, code: 'bare', down: true },
  { status: 503, code: 'llm_unavailable', down: true },
  { status: 503, code: 'overloaded', down: true },
  { status: 429, code: 'rate_limited', down: true },
  { status: 429, code: 'judge_budget_exceeded', down: true },
  { status: 500, code: 'bare', down: false },
  { status: 400, code: 'bare', down: false },
  { status: 404, code: 'bare', down: false },
  { status: 400, code: 'invalid_request', down: false },
  { status: 401, code: 'unauthorized', down: false },
  { status: 413, code: 'payload_too_large', down: false },
  { status: 503, code: 'invalid_request', down: false },
]

describe("the Python client's judge_is_down, after its retries", () => {
  let base = ''
  let requests = new Map<string, number>()
  const server = createServer((req, res) => {
    requests.set(req.url ?? '', (requests.get(req.url ?? '') ?? 0) + 1)
    answer(req, res)
  })
  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  afterAll(async () => {
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  })

  it('is true for the judge out of reach and false for a request to fix', async () => {
    requests = new Map()
    const code = [
      'import json, sys',
      'from reward_harness_client import RewardHarnessClient, RewardHarnessError, judge_is_down',
      'out = []',
      'for case in json.loads(sys.argv[2]):',
      '    client = RewardHarnessClient(f"{sys.argv[1]}/{case[0]}/{case[1]}", max_attempts=3, sleep=lambda s: None)',
      '    try:',
      '        client.rollouts_complete()',
      '        out.append(None)',
      '    except RewardHarnessError as e:',
      '        out.append({"status": e.status, "code": e.code, "down": judge_is_down(e)})',
      'print(json.dumps(out))',
    ].join('\n')
    const cases = JSON.stringify(CASES.map((c) => [c.status, c.code]))
    const { stdout } = await promisify(execFile)('python3', ['-c', code, base, cases], {
      timeout: 60_000,
      env: { ...process.env, PYTHONPATH: path.join(ROOT, 'clients/python'), PYTHONDONTWRITEBYTECODE: '1' },
    })
    const seen = JSON.parse(stdout.trim()) as { status: number; code: string; down: boolean }[]
    expect(seen).toEqual(
      CASES.map((c) => ({ status: c.status, code: c.code === 'bare' ? 'http_error' : c.code, down: c.down })),
    )
    // The gateway's answers and the judge's own overload were sent 3 times before the client gave up; a budget's 429
    // and every request to fix, once.
    const sent = CASES.map((c) => requests.get(`/${c.status}/${c.code}/complete`) ?? 0)
    const retried = (c: (typeof CASES)[number]) =>
      [502, 503].includes(c.status) || (c.status === 429 && c.code === 'rate_limited')
    expect(sent).toEqual(CASES.map((c) => (retried(c) ? 3 : 1)))
  }, 60_000)
})
