import { createExecutionContext, runInDurableObject, waitOnExecutionContext } from 'cloudflare:test'
import { env, exports } from 'cloudflare:workers'
import { ledgerName } from '../../durable-objects/names.ts'
import { expect, vi } from 'vitest'
import type { RunConfigInput } from '../../src/schemas/run-config.ts'
import { createApp } from '../../workers/app.ts'

export const ADMIN_TOKEN = 'test-admin-token'

export const METADATA = { high_level_goal: 'math', model_size: '7B', current_step: 0, total_steps: 10 }

/** What a test request sends: a JSON `body`, or `raw` bytes as they are; `token` becomes the bearer. */
export interface CallOptions {
  body?: unknown
  token?: string
  headers?: Record<string, string>
  raw?: BodyInit
}

/**
 * Sends a request to the Worker under test (real workerd, real DOs and D1).
 * @example const res = await call('POST', '/score', { body: { rollout, metadata } })
 */
export async function call(method: string, path: string, options: CallOptions = {}) {
  return answerOf(await exports.default.fetch(requestOf(method, path, options)))
}

const app = createApp()

/**
 * Sends a request to the Hono app in this isolate (optionally with another `env`) and waits for the work it left in
 * its execution context, so what the request settles after answering (call logs, records) is there when it returns.
 * @example const { json } = await callApp('GET', '/llm_calls', { token: run.token })
 */
export async function callApp(method: string, path: string, options: CallOptions & { env?: object } = {}) {
  const ctx = createExecutionContext()
  const answer = await answerOf(await app.fetch(requestOf(method, path, options), options.env ?? env, ctx))
  await waitOnExecutionContext(ctx)
  return answer
}

/**
 * The Request `call` sends.
 * @example await app.fetch(requestOf('GET', '/healthz'), env, ctx)
 */
export function requestOf(method: string, path: string, options: CallOptions = {}): Request {
  const headers: Record<string, string> = { ...(options.headers ?? {}) }
  if (options.body !== undefined) headers['content-type'] ??= 'application/json'
  if (options.token) headers.authorization = `Bearer ${options.token}`
  return new Request(`http://worker.test${path}`, {
    method,
    headers,
    ...(options.raw !== undefined
      ? { body: options.raw }
      : options.body !== undefined
        ? { body: JSON.stringify(options.body) }
        : {}),
  })
}

/**
 * A response as tests read it: status, body text, the body parsed when it is JSON, headers.
 * @example const { status, json } = await answerOf(response)
 */
export async function answerOf(response: Response) {
  const text = await response.text()
  let json: any
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  return { status: response.status, json, text, headers: response.headers }
}

let runCounter = 0

/**
 * Creates a run through the admin API and returns its id and token.
 * @example const run = await createRun({ anchor_rubrics: [{ text: 'Correct.' }] })
 */
export async function createRun(config: RunConfigInput, runId = `t-${Date.now().toString(36)}-${++runCounter}`) {
  const res = await call('POST', '/runs', { token: ADMIN_TOKEN, body: { run_id: runId, config } })
  if (res.status !== 201) throw new Error(`could not create run: ${res.status} ${res.text}`)
  return { runId: res.json.run_id as string, token: res.json.token as string }
}

/**
 * A rollout with sensible defaults.
 * @example rollout('r1', { output: '5' })
 */
export function rollout(
  id: string,
  overrides: Partial<{ input: string; output: string; supplemental_context: string }> = {},
) {
  return { id, input: 'What is 2+2?', output: '4', supplemental_context: '4', ...overrides }
}

/**
 * Waits until `/rubric_status` of the token's run matches `expected`: ledger shards report their counts in batches
 * (every `LEDGER_REPORT_MS`), so counts are eventually right, not at once.
 * @example await expectStatus(run.token, { status: 'collecting', rollouts: 2 })
 */
export async function expectStatus(token: string | undefined, expected: Record<string, unknown>) {
  let last: any
  await vi.waitFor(
    async () => {
      last = (await call('GET', '/rubric_status', { token })).json
      expect(last).toMatchObject(expected)
    },
    { timeout: 5_000, interval: 50 },
  )
  return last
}

/**
 * Rows in the ledgers of a run's instance, read from each shard's own storage: a check that does not wait on reports.
 * @example expect(await ledgerRows(run.runId)).toBe(0)
 */
export async function ledgerRows(runId: string, instanceId = 'global', shards = 8): Promise<number> {
  let rows = 0
  for (let shard = 0; shard < shards; shard++) {
    rows += await runInDurableObject(env.LEDGER.getByName(ledgerName(runId, instanceId, shard)), (_instance, state) => {
      const exists = state.storage.sql.exec(`SELECT count(*) AS n FROM sqlite_master WHERE name = 'ledger'`).one()
        .n as number
      return exists ? (state.storage.sql.exec('SELECT count(*) AS n FROM ledger').one().n as number) : 0
    })
  }
  return rows
}

/**
 * Routes the Worker's requests to `http://llm.test/<tag>/…` (a role's base_url) to `answer`; the Worker runs in this
 * isolate, so its `fetch` is this one. Everything else goes to the real fetch. `answer` sees the request and gives the
 * reply's content, or a Response of its own (an HTTP error, another API's answer).
 * @example const judge = fakeEndpoint('slow', async () => { await held; return reply })
 */
export function fakeEndpoint(tag: string, answer: (callIndex: number, request: Request) => Promise<string | Response>) {
  let calls = 0
  const realFetch = (fakeFetches.real ??= globalThis.fetch)
  fakeFetches.routes.set(`http://llm.test/${tag}/`, async (request) => {
    const content = await answer(calls++, request)
    if (content instanceof Response) return content
    const completion = {
      id: `c-${calls}`,
      object: 'chat.completion',
      created: 0,
      model: 'fake',
      choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content } }],
    }
    return new Response(JSON.stringify(completion), { headers: { 'content-type': 'application/json' } })
  })
  if (!vi.isMockFunction(globalThis.fetch)) {
    vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
      const url = input instanceof Request ? input.url : String(input)
      const route = [...fakeFetches.routes].find(([prefix]) => url.startsWith(prefix))
      return route ? route[1](new Request(input, init)) : realFetch(input, init)
    })
  }
  return { calls: () => calls }
}
const fakeFetches: { real?: typeof fetch; routes: Map<string, (request: Request) => Promise<Response>> } = {
  routes: new Map(),
}

/**
 * Forgets every fake endpoint: call it after each test that made one.
 * @example afterEach(() => clearFakeEndpoints())
 */
export function clearFakeEndpoints(): void {
  fakeFetches.routes.clear()
}

/**
 * A role on a fake endpoint (`fakeEndpoint(tag, …)`); the tag keeps each test's model adapter its own.
 * @example createRun({ ...RUBRICS, agents: { updater: fakeRole('held') } })
 */
export const fakeRole = (tag: string) => ({
  backend: 'openai' as const,
  base_url: `http://llm.test/${tag}/v1`,
  model: 'fake',
  timeout_ms: 20_000,
  max_attempts: 1,
})

/**
 * Resets a Durable Object the way a deploy or an eviction does: in-memory state and open calls are dropped, storage
 * stays.
 * @example await resetObject(env.RUN_COORDINATOR.getByName(coordinatorName(run.runId)))
 */
export async function resetObject(stub: DurableObjectStub): Promise<void> {
  await runInDurableObject(stub, (_object, state) => state.abort('reset by the test')).catch((error: Error) => {
    // abort() throws inside the object by design; anything else is a real failure.
    if (!/reset by the test/.test(String(error))) throw error
  })
}
