import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, onTestFinished, vi } from 'vitest'
import fc from 'fast-check'
import { LlmError, withRetry } from '../../src/llm/index.ts'
import { DEFAULT_MAX_TOKENS } from '../../src/llm/response-format.ts'
import {
  EndpointPool,
  endpointsFromFlags,
  loadEndpointsFile,
  parseEndpointFlag,
  type PoolRequest,
} from '../../offline/llm/index.ts'
import {
  affinityOf,
  PoolError,
  type EndpointPoolOptions,
  type PoolEvent,
  type PoolUsage,
} from '../../offline/llm/pool.ts'
import { failureOf } from '../support/failure.ts'
import { startLlmStub, type LlmStub, type StubFault } from '../support/llm-stub.ts'

const TASK = 'score'
const ask = (content: string, extra: Partial<PoolRequest> = {}): PoolRequest => ({
  role: 'scorer',
  messages: [{ role: 'user', content }],
  task: TASK,
  json: true,
  ...extra,
})

/** A judge prompt of `group`: a long prefix the group shares, then answer `i` in its own data block. */
const judgePrompt = (group: string, i: number) =>
  `group ${group}: ${'rubric and prompt text '.repeat(60)}\n\nThe answer (data):\n` +
  `<<<DATA-t${i}\nanswer ${i}\nDATA-t${i}>>>`

describe('affinityOf', () => {
  it('gives the answers of one group the same key, other groups another, short or data-less prompts none', () => {
    const key = (content: string) => affinityOf(ask(content))
    expect(key(judgePrompt('A', 1))).toBe(key(judgePrompt('A', 2)))
    expect(key(judgePrompt('A', 1))).not.toBe(key(judgePrompt('B', 1)))
    expect(key('group A: short\n<<<DATA-t1\nanswer\nDATA-t1>>>')).toBeUndefined()
    expect(key(`group A: ${'text '.repeat(400)}`)).toBeUndefined()
  })
})

/**
 * Every view of the accounting must satisfy calls == ok + Σ failures; the endpoints' calls add up to what the servers
 * received.
 */
function expectAccounted(usage: PoolUsage, received: number): void {
  const views = [usage.total, ...Object.values(usage.roles), ...Object.values(usage.endpoints)]
  for (const view of views)
    expect(view.calls).toBe(view.ok + Object.values(view.failures).reduce((sum, n) => sum + (n ?? 0), 0))
  expect(usage.total.calls).toBe(received)
  expect(Object.values(usage.endpoints).reduce((sum, endpoint) => sum + endpoint.calls, 0)).toBe(received)
  expect(Object.values(usage.roles).reduce((sum, role) => sum + role.calls, 0)).toBe(received)
}

// -----------------------------------------------------------------------------------------------
// A small OpenAI-compatible server whose replies take `latencyMs`, counting requests in flight.

interface SlowStub {
  baseUrl: string
  latencyMs: number
  /** Chat requests received, by their user message. */
  received: string[]
  inFlight: number
  peak: number
  /** Answer chat requests with this status instead of a completion. */
  failWith: number | undefined
  /** Answer GET /models with 200 (else 503). */
  modelsOk: boolean
  close(): Promise<void>
}

async function startSlowStub(latencyMs: number): Promise<SlowStub> {
  const stub: SlowStub = {
    baseUrl: '',
    latencyMs,
    received: [],
    inFlight: 0,
    peak: 0,
    failWith: undefined,
    modelsOk: true,
    close: async () => {},
  }
  const server: Server = createServer(async (req, res) => {
    if (req.method === 'GET' && req.url?.endsWith('/models')) {
      res.writeHead(stub.modelsOk ? 200 : 503, { 'content-type': 'application/json' })
      return res.end(JSON.stringify({ object: 'list', data: [] }))
    }
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
      model: string
      messages: { content: string }[]
    }
    stub.received.push(body.messages.at(-1)?.content ?? '')
    stub.peak = Math.max(stub.peak, ++stub.inFlight)
    const status = stub.failWith
    setTimeout(
      () => {
        stub.inFlight--
        res.writeHead(status ?? 200, { 'content-type': 'application/json' })
        res.end(
          JSON.stringify(
            status
              ? { error: { message: `slow stub ${status}` } }
              : {
                  id: 'x',
                  object: 'chat.completion',
                  created: 0,
                  model: body.model,
                  choices: [
                    { index: 0, finish_reason: 'stop', message: { role: 'assistant', content: '{"ok":true}' } },
                  ],
                  usage: { prompt_tokens: 10, completion_tokens: 2 },
                },
          ),
        )
      },
      status ? 1 : stub.latencyMs,
    )
  })
  server.keepAliveTimeout = 1_000
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  stub.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`
  stub.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    })
  return stub
}

const pools: EndpointPool[] = []
function makePool(options: EndpointPoolOptions): EndpointPool {
  const pool = new EndpointPool({
    model: 'stub-model',
    timeoutMs: 2_000,
    baseDelayMs: 5,
    maxDelayMs: 1_000,
    probeIntervalMs: 30,
    ...options,
  })
  pools.push(pool)
  return pool
}
afterEach(async () => {
  await Promise.all(pools.splice(0).map((pool) => pool.close()))
})

// -----------------------------------------------------------------------------------------------

describe('endpoint configuration', () => {
  let dir: string
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'pool-endpoints-'))
  })
  afterAll(() => rm(dir, { recursive: true, force: true }))

  it('reads {endpoints: [...]} and a plain list, with defaults', async () => {
    const file = path.join(dir, 'a.json')
    await writeFile(
      file,
      JSON.stringify({
        endpoints: [
          { base_url: 'http://gpu-1:8000/v1', max_concurrency: 8, structured_output: 'json_schema' },
          { base_url: 'http://gpu-2:8000/v1', max_concurrency: 2, model: 'q', api_key_env: 'VLLM_KEY' },
        ],
      }),
    )
    const endpoints = await loadEndpointsFile(file)
    expect(endpoints).toEqual([
      { base_url: 'http://gpu-1:8000/v1', max_concurrency: 8, structured_output: 'json_schema' },
      {
        base_url: 'http://gpu-2:8000/v1',
        max_concurrency: 2,
        model: 'q',
        api_key_env: 'VLLM_KEY',
        structured_output: 'json_object',
      },
    ])
    const list = path.join(dir, 'b.json')
    await writeFile(list, JSON.stringify([{ base_url: 'http://gpu-3:8000/v1', max_concurrency: 1 }]))
    expect(await loadEndpointsFile(list)).toHaveLength(1)
  })

  it('names the file and the field of every mistake', async () => {
    const file = path.join(dir, 'bad.json')
    await writeFile(
      file,
      JSON.stringify({
        endpoints: [
          { base_url: 'http://gpu-1:8000/v1', max_concurrency: 2 },
          { base_url: 'gpu-2', max_concurrency: 0, colour: 'red' },
        ],
      }),
    )
    const message = (await loadEndpointsFile(file).catch((error: Error) => error.message)) as string
    expect(message).toContain(file)
    expect(message).toMatch(/endpoints\[1\]\.base_url: an http\(s\) URL/)
    expect(message).toMatch(/endpoints\[1\]\.max_concurrency: at least 1/)
    expect(message).toMatch(/endpoints\[1\]: unknown key "colour"; the keys are name, base_url/)
    await writeFile(file, JSON.stringify([{ base_url: 'http://gpu-1:8000/v1' }]))
    await expect(loadEndpointsFile(file)).rejects.toThrow(/\[0\]\.max_concurrency: a positive integer/)
    await writeFile(
      file,
      JSON.stringify([
        { base_url: 'http://gpu-1:8000/v1', max_concurrency: 1 },
        { base_url: 'http://gpu-1:8000/v1/', max_concurrency: 1 },
      ]),
    )
    await expect(loadEndpointsFile(file)).rejects.toThrow(/\[1\]\.base_url: .* is already endpoint 0/)
    await writeFile(file, '{"endpoints": [')
    await expect(loadEndpointsFile(file)).rejects.toThrow(/not JSON/)
    await expect(loadEndpointsFile(path.join(dir, 'missing.json'))).rejects.toThrow(/cannot read/)
  })

  it('parses --endpoint flags with key=value settings', () => {
    expect(parseEndpointFlag('http://gpu-1:8000/v1,max_concurrency=8,structured_output=json_schema,model=q')).toEqual({
      base_url: 'http://gpu-1:8000/v1',
      max_concurrency: 8,
      structured_output: 'json_schema',
      model: 'q',
    })
    expect(
      endpointsFromFlags(['http://a:1/v1', 'http://b:1/v1'], 6).map((endpoint) => endpoint.max_concurrency),
    ).toEqual([6, 6])
    expect(() => parseEndpointFlag('http://a:1/v1,max_concurrency=-1')).toThrow(/--endpoint .*max_concurrency/)
    expect(() => parseEndpointFlag('http://a:1/v1,fast')).toThrow(/"fast" is not key=value/)
    expect(() => endpointsFromFlags([])).toThrow(/at least one/)
  })

  it('refuses an api_key_env that is not set, and a pool without a model', () => {
    expect(
      () =>
        new EndpointPool({
          endpoints: [{ base_url: 'http://a:1/v1', max_concurrency: 1, api_key_env: 'NOT_SET_ANYWHERE' }],
          model: 'm',
          secrets: {},
          probeAtStart: false,
        }),
    ).toThrow(/NOT_SET_ANYWHERE/)
    expect(
      () => new EndpointPool({ endpoints: [{ base_url: 'http://a:1/v1', max_concurrency: 1 }], probeAtStart: false }),
    ).toThrow(/no model/)
  })
})

describe('balancing and concurrency caps (3 slow endpoints)', () => {
  let stubs: SlowStub[]
  beforeAll(async () => {
    stubs = await Promise.all([startSlowStub(40), startSlowStub(40), startSlowStub(40)])
  })
  afterAll(() => Promise.all(stubs.map((stub) => stub.close())))
  afterEach(() => {
    for (const stub of stubs)
      Object.assign(stub, { received: [], peak: 0, latencyMs: 40, failWith: undefined, modelsOk: true })
  })
  const endpoints = (caps: number[]) =>
    stubs.map((stub, index) => ({ base_url: stub.baseUrl, max_concurrency: caps[index]! }))

  it('goes round-robin when every endpoint is idle, and spreads a burst evenly (least outstanding)', async () => {
    const pool = makePool({ endpoints: endpoints([10, 10, 10]) })
    for (let i = 0; i < 6; i++) await pool.complete(ask(`seq ${i}`))
    expect(stubs.map((stub) => stub.received.length)).toEqual([2, 2, 2])
    await Promise.all(Array.from({ length: 9 }, (_, i) => pool.complete(ask(`burst ${i}`))))
    expect(stubs.map((stub) => stub.received.length)).toEqual([5, 5, 5])
    expect(stubs.map((stub) => stub.peak)).toEqual([3, 3, 3])
  })

  it('sends less to a slow endpoint under sustained load', async () => {
    stubs[0]!.latencyMs = 150
    stubs[1]!.latencyMs = 10
    stubs[2]!.latencyMs = 10
    const pool = makePool({ endpoints: endpoints([8, 8, 8]) })
    // Six callers, each sending its next question as soon as the last is answered.
    await Promise.all(
      Array.from({ length: 6 }, async (_, worker) => {
        for (let i = 0; i < 10; i++) await pool.complete(ask(`w${worker} q${i}`))
      }),
    )
    const [slow, fastA, fastB] = stubs.map((stub) => stub.received.length)
    expect(slow! + fastA! + fastB!).toBe(60)
    expect(slow).toBeLessThan(fastA! / 2)
    expect(slow).toBeLessThan(fastB! / 2)
  })

  it('never exceeds a cap: 40 concurrent requests over caps 2, 2, 1', async () => {
    const pool = makePool({ endpoints: endpoints([2, 2, 1]) })
    const replies = await Promise.all(Array.from({ length: 40 }, (_, i) => pool.complete(ask(`cap ${i}`))))
    expect(replies.every((reply) => reply.text === '{"ok":true}')).toBe(true)
    expect(stubs.map((stub) => stub.peak)).toEqual([2, 2, 1])
    const usage = pool.usage()
    expect(Object.values(usage.endpoints).map((endpoint) => endpoint.peak_outstanding)).toEqual([2, 2, 1])
    expect(usage.total).toMatchObject({
      requests: 40,
      calls: 40,
      ok: 40,
      retries: 0,
      prompt_tokens: 400,
      completion_tokens: 80,
    })
    expect(usage.queued).toBe(0)
    expectAccounted(
      usage,
      stubs.reduce((sum, stub) => sum + stub.received.length, 0),
    )
    // With every slot busy all the time, the load follows the caps.
    expect(stubs[2]!.received.length).toBeLessThan(stubs[0]!.received.length)
  })

  it('keeps a group sharing a long prompt prefix on one endpoint, spilling to the others when it is full', async () => {
    const pool = makePool({ endpoints: endpoints([2, 2, 2]) })
    // One at a time, an idle pool would go round-robin; a judge prompt goes where its group's prefix is cached.
    for (let i = 0; i < 6; i++) await pool.complete(ask(judgePrompt('A', i)))
    for (let i = 0; i < 6; i++) await pool.complete(ask(judgePrompt('B', i)))
    const holding = (group: string) =>
      stubs.map((stub) => stub.received.filter((text) => text.startsWith(`group ${group}`)).length)
    expect(holding('A').filter((count) => count > 0)).toEqual([6])
    expect(holding('B').filter((count) => count > 0)).toEqual([6])
    // Nine at once: the group's endpoint takes its cap, the rest are balanced over the others, none waits for it.
    for (const stub of stubs) stub.received.length = 0
    await Promise.all(Array.from({ length: 9 }, (_, i) => pool.complete(ask(judgePrompt('A', 100 + i)))))
    expect(holding('A').sort()).toEqual([3, 3, 3])
    expect(stubs.map((stub) => stub.peak)).toEqual([2, 2, 2])
  })

  it('serves a full pool in FIFO order', async () => {
    const pool = makePool({ endpoints: [{ base_url: stubs[0]!.baseUrl, max_concurrency: 1 }] })
    const order = Array.from({ length: 10 }, (_, i) => `fifo ${i}`)
    await Promise.all(order.map((content) => pool.complete(ask(content))))
    expect(stubs[0]!.received).toEqual(order)
  })

  it(
    'takes an endpoint out after consecutive failures, keeps it out while probes fail, and puts it back when one ' +
      'succeeds',
    async () => {
      const [down] = stubs
      down!.failWith = 500
      down!.modelsOk = false
      const events: PoolEvent[] = []
      const pool = makePool({
        endpoints: endpoints([1, 4, 4]),
        failureThreshold: 2,
        probeAtStart: false,
        onEvent: (event) => events.push(event),
      })
      await Promise.all(Array.from({ length: 30 }, (_, i) => pool.complete(ask(`out ${i}`))))
      // Its cap of 1 means its requests came one at a time: exactly `failureThreshold` of them, then it was out.
      expect(down!.received).toHaveLength(2)
      expect(events.filter((event) => event.type === 'endpoint_out').map((event) => event.endpoint)).toEqual([
        down!.baseUrl,
      ])
      await vi.waitFor(() => expect(pool.usage().endpoints[down!.baseUrl]!.probe_failures).toBeGreaterThanOrEqual(2))
      await Promise.all(Array.from({ length: 6 }, (_, i) => pool.complete(ask(`still out ${i}`))))
      expect(down!.received).toHaveLength(2)
      expect(pool.usage().endpoints[down!.baseUrl]!.healthy).toBe(false)

      down!.failWith = undefined
      down!.modelsOk = true
      await vi.waitFor(() => expect(events.at(-1)).toEqual({ type: 'endpoint_back', endpoint: down!.baseUrl }))
      await Promise.all(Array.from({ length: 9 }, (_, i) => pool.complete(ask(`back ${i}`))))
      expect(down!.received.length).toBeGreaterThan(2)
      const usage = pool.usage()
      expect(usage.endpoints[down!.baseUrl]).toMatchObject({
        healthy: true,
        taken_out: 1,
        restored: 1,
        calls: down!.received.length,
        failures: { server_error: 2 },
      })
      expect(usage.total).toMatchObject({ requests: 45, ok: 45, retries: 2, gave_up: 0 })
      expectAccounted(
        usage,
        stubs.reduce((sum, stub) => sum + stub.received.length, 0),
      )
    },
  )

  it('fails waiting requests when every endpoint stays out', async () => {
    for (const stub of stubs) stub.modelsOk = false
    const pool = makePool({ endpoints: endpoints([1, 1, 1]), unavailableTimeoutMs: 150, probeIntervalMs: 40 })
    await pool.ready()
    const started = Date.now()
    const failure = await failureOf(pool.complete(ask('nobody home')))
    expect(failure).toBeInstanceOf(PoolError)
    expect(failure.message).toMatch(/no healthy endpoint/)
    expect(Date.now() - started).toBeGreaterThanOrEqual(100)
    expect(stubs.every((stub) => stub.received.length === 0)).toBe(true)
    // Later requests fail at once until an endpoint is back, then work again.
    expect(await failureOf(pool.complete(ask('still nobody')))).toBeInstanceOf(PoolError)
    stubs[1]!.modelsOk = true
    await vi.waitFor(() => expect(pool.usage().endpoints[stubs[1]!.baseUrl]!.healthy).toBe(true))
    expect((await pool.complete(ask('someone'))).endpoint).toBe(stubs[1]!.baseUrl)
    expect(pool.usage().total).toMatchObject({ requests: 3, calls: 1, gave_up: 2 })
  })

  it('lets a caller abort a queued request without sending it', async () => {
    const pool = makePool({ endpoints: [{ base_url: stubs[0]!.baseUrl, max_concurrency: 1 }] })
    const controller = new AbortController()
    const first = pool.complete(ask('first'))
    const second = pool.complete(ask('second', { signal: controller.signal }))
    controller.abort(new Error('not needed any more'))
    await expect(second).rejects.toThrow('not needed any more')
    await first
    expect(stubs[0]!.received).toEqual(['first'])
    expect(pool.usage().total).toMatchObject({ requests: 2, calls: 1, gave_up: 1 })
  })
})

describe('faults, retries and accounting (3 llm stubs)', () => {
  let stubs: LlmStub[]
  beforeAll(async () => {
    stubs = await Promise.all([startLlmStub(), startLlmStub(), startLlmStub()])
  })
  afterAll(() => Promise.all(stubs.map((stub) => stub.close())))
  // The stub's fault queue cannot be cleared: every test consumes exactly the faults it scripts.
  beforeEach(() => {
    for (const stub of stubs) {
      stub.requests.length = 0
      stub.respondWith(() => '{"ok":true}')
    }
  })
  /** Sends `count` requests straight to `stub`, one attempt each, to consume faults still scripted there. */
  async function drain(stub: LlmStub, count: number): Promise<void> {
    const direct = new EndpointPool({
      endpoints: [{ base_url: stub.baseUrl, max_concurrency: 8 }],
      model: 'stub-model',
      timeoutMs: 300,
      maxAttempts: 1,
      failureThreshold: 1_000,
      probeAtStart: false,
    })
    for (let left = count; left > 0; left -= 8) {
      await Promise.allSettled(Array.from({ length: Math.min(8, left) }, () => direct.complete(ask('drain'))))
    }
    await direct.close()
  }
  const received = () => stubs.reduce((sum, stub) => sum + stub.requests.length, 0)
  const endpoints = (caps = [4, 4, 4]) =>
    stubs.map((stub, index) => ({ base_url: stub.baseUrl, max_concurrency: caps[index]! }))

  it('completes all requests while one endpoint fails ~30% (429, 500, timeouts); ejects and readmits it', async () => {
    const ok: StubFault = { kind: 'content', text: '{"ok":true}' }
    const faults: StubFault[] = [
      { kind: 'status', status: 429, retryAfterSeconds: 0.05 },
      { kind: 'status', status: 500 },
      { kind: 'hang' },
    ]
    // Six health failures first (≥ threshold + cap − 1, so the take-out is certain), then 30% faults.
    const opening: StubFault[] = [
      { kind: 'status', status: 500 },
      { kind: 'hang' },
      { kind: 'status', status: 502 },
      { kind: 'status', status: 500 },
      { kind: 'hang' },
      { kind: 'status', status: 503 },
    ]
    const rest = Array.from(
      { length: 60 },
      (_, i): StubFault => ([2, 5, 8].includes(i % 10) ? faults[Math.floor(i / 3) % 3]! : ok),
    )
    stubs[0]!.script(...opening, ...rest)
    onTestFinished(() => drain(stubs[0]!, opening.length + rest.length - stubs[0]!.requests.length))
    const events: PoolEvent[] = []
    const pool = makePool({
      endpoints: endpoints(),
      timeoutMs: 300,
      maxAttempts: 6,
      failureThreshold: 3,
      onEvent: (event) => events.push(event),
    })
    const roles = ['scorer', 'analyzer'] as const
    const replies = await Promise.all(
      Array.from({ length: 90 }, (_, i) =>
        pool.complete(ask(`mixed ${i}`, i % 3 === 2 ? { account: 'verifier' } : { role: roles[i % 2]! })),
      ),
    )
    expect(replies).toHaveLength(90)
    const failing = stubs[0]!.baseUrl
    expect(events).toContainEqual(expect.objectContaining({ type: 'endpoint_out', endpoint: failing }))
    await vi.waitFor(() => expect(pool.usage().endpoints[failing]!.healthy).toBe(true))
    expect(events).toContainEqual({ type: 'endpoint_back', endpoint: failing })

    const usage = pool.usage()
    expectAccounted(usage, received())
    expect(usage.total).toMatchObject({ requests: 90, ok: 90, gave_up: 0 })
    expect(usage.total.calls - 90).toBe(usage.total.retries)
    expect(usage.total.prompt_tokens).toBe(90 * 100)
    expect(usage.total.completion_tokens).toBe(90 * 20)
    expect(Object.keys(usage.roles).sort()).toEqual(['analyzer', 'scorer', 'verifier'])
    expect(usage.roles.verifier!.requests).toBe(30)
    const bad = usage.endpoints[failing]!
    expect(bad.calls).toBe(stubs[0]!.requests.length)
    expect(bad.failures.server_error).toBeGreaterThanOrEqual(4)
    expect(bad.failures.timeout).toBeGreaterThanOrEqual(2)
    expect(bad.taken_out).toBeGreaterThanOrEqual(1)
    expect(bad.restored).toBe(bad.taken_out)
    // The healthy endpoints never failed.
    for (const stub of stubs.slice(1)) expect(usage.endpoints[stub.baseUrl]!.failures).toEqual({})
  })

  it('honours Retry-After on the endpoint that sent it (measured)', async () => {
    const [only] = stubs
    only!.script({ kind: 'status', status: 429, retryAfterSeconds: 0.4 })
    let answeredAt = 0
    only!.respondWith(() => {
      answeredAt = Date.now()
      return '{"ok":true}'
    })
    const pool = makePool({ endpoints: [{ base_url: only!.baseUrl, max_concurrency: 2 }], baseDelayMs: 0 })
    const started = Date.now()
    const reply = await pool.complete(ask('patience'))
    expect(answeredAt - started).toBeGreaterThanOrEqual(390)
    expect(reply.attempts).toBe(2)
    expect(pool.usage().total).toMatchObject({ calls: 2, ok: 1, retries: 1, failures: { rate_limited: 1 } })
    // It waits 0.4 s; the budget leaves room for a loaded machine.
  }, 20_000)

  it('moves the retry of a 429 to another endpoint at once, and keeps the limited one cool', async () => {
    const [limited, other] = stubs
    limited!.script({ kind: 'status', status: 429, retryAfterSeconds: 2 })
    const pool = makePool({
      endpoints: [
        { base_url: limited!.baseUrl, max_concurrency: 4 },
        { base_url: other!.baseUrl, max_concurrency: 4 },
      ],
      baseDelayMs: 0,
      maxDelayMs: 5_000,
    })
    const started = Date.now()
    const first = await pool.complete(ask('first'))
    expect(first).toMatchObject({ endpoint: other!.baseUrl, attempts: 2 })
    await Promise.all(Array.from({ length: 6 }, (_, i) => pool.complete(ask(`during cooldown ${i}`))))
    expect(Date.now() - started).toBeLessThan(1_000)
    expect(limited!.requests).toHaveLength(1)
    expect(other!.requests).toHaveLength(7)
  })

  it('backs off exponentially with jitter, bounds the attempts, and does not stack under withRetry', async () => {
    const [only] = stubs
    const sleeps: number[] = []
    const pool = makePool({
      endpoints: [{ base_url: only!.baseUrl, max_concurrency: 1 }],
      maxAttempts: 4,
      baseDelayMs: 100,
      maxDelayMs: 300,
      failureThreshold: 100,
      random: () => 0.5,
      sleep: async (ms) => void sleeps.push(ms),
    })
    only!.script(...Array.from({ length: 3 }, () => ({ kind: 'status' as const, status: 500 })))
    expect((await pool.complete(ask('eventually'))).attempts).toBe(4)
    expect(sleeps).toEqual([50, 100, 150])

    // Exactly the pool's four attempts fail; a stacked retry would reach the stub a fifth time and succeed.
    only!.script(...Array.from({ length: 4 }, () => ({ kind: 'status' as const, status: 503 })))
    only!.requests.length = 0
    const failure = await failureOf(
      withRetry(() => pool.complete(ask('never')), { maxAttempts: 3, sleep: async () => {} }),
    )
    expect(failure).toBeInstanceOf(PoolError)
    expect(failure).toMatchObject({ kind: 'server_error', attempts: 4, retryable: false })
    expect(only!.requests).toHaveLength(4)
  })

  it('passes invalid replies and refused requests straight to the caller (one HTTP request each)', async () => {
    const [only] = stubs
    const pool = makePool({ endpoints: [{ base_url: only!.baseUrl, max_concurrency: 1 }] })
    only!.script({ kind: 'content', text: '   ' })
    const invalid = await failureOf(pool.complete(ask('empty')))
    expect(invalid).toBeInstanceOf(LlmError)
    expect(invalid).toMatchObject({ kind: 'invalid_reply', retryable: true })
    only!.script({ kind: 'status', status: 400 })
    expect(await failureOf(pool.complete(ask('refused')))).toMatchObject({ kind: 'bad_request', retryable: false })
    expect(only!.requests).toHaveLength(2)
    expect(pool.usage().roles.scorer).toMatchObject({
      requests: 2,
      calls: 2,
      ok: 0,
      gave_up: 2,
      failures: { invalid_reply: 1, bad_request: 1 },
    })
  })

  it('sends a JSON schema where supported, json_object elsewhere, and the seed per request', async () => {
    const [strict, loose] = stubs
    const pool = makePool({
      endpoints: [
        { base_url: strict!.baseUrl, max_concurrency: 1, structured_output: 'json_schema' },
        { base_url: loose!.baseUrl, max_concurrency: 1 },
      ],
      seed: 3,
      temperature: 0.7,
    })
    const schema = {
      type: 'object',
      properties: { ok: { type: 'boolean' } },
      required: ['ok'],
      additionalProperties: false,
    }
    await pool.complete(ask('schema a', { jsonSchema: { name: 'verdict', schema } }))
    await pool.complete(ask('schema b', { jsonSchema: { name: 'verdict', schema }, seed: 9 }))
    expect(strict!.requests[0]).toMatchObject({
      seed: 3,
      temperature: 0.7,
      response_format: { type: 'json_schema', json_schema: { name: 'verdict', schema, strict: true } },
    })
    expect(loose!.requests[0]).toMatchObject({ seed: 9, response_format: { type: 'json_object' } })
    await pool.complete(ask('plain', { json: false, seed: 11 }))
    await pool.complete(ask('plain json'))
    expect(strict!.requests[1]).toMatchObject({ seed: 11 })
    expect(strict!.requests[1]).not.toHaveProperty('response_format')
    expect(loose!.requests[1]).toMatchObject({ seed: 3, response_format: { type: 'json_object' } })
    expect(pool.id).toBe('pool:stub-model')
  })

  it("sends each request's own max_tokens (the default where it has none) unless the pool sets one", async () => {
    const [stub] = stubs
    const endpoints = [{ base_url: stub!.baseUrl, max_concurrency: 1 }]
    const open = makePool({ endpoints })
    const capped = makePool({ endpoints, maxTokens: 300 })
    await fc.assert(
      fc.asyncProperty(fc.option(fc.integer({ min: 1, max: 8_192 }), { nil: undefined }), async (maxTokens) => {
        stub!.requests.length = 0
        const request = ask('room', maxTokens === undefined ? {} : { maxTokens })
        await open.complete(request)
        await capped.complete(request)
        expect(stub!.requests.map((body) => body.max_tokens)).toEqual([maxTokens ?? DEFAULT_MAX_TOKENS, 300])
      }),
      { numRuns: 25 },
    )
  })
})
