/**
 * Rate limiting (issue 8 item 5) with the Workers rate-limiting binding, simulated by Miniflare. The app is served
 * with the TEST_* bindings of tests/workers/vitest.config.ts in place of the real ones: 3 requests per 10 s per caller
 * (standard tier), 6 (high tier) and 5 for the admin token, so each 429 comes at a known request.
 */
import { env } from 'cloudflare:workers'
import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import type { RunConfigInput } from '../../src/schemas/run-config.ts'
import { createApp } from '../../workers/app.ts'
import { secondsToWindowEnd } from '../../workers/middleware/rate-limit.ts'
import { ADMIN_TOKEN, METADATA, createRun, ledgerRows, rollout } from './helpers.ts'

const LIMIT = { standard: 3, high: 6, admin: 5, refused: 2 }
/** The TEST_* bindings' window. */
const PERIOD_S = 10

const testBindings = env as unknown as {
  TEST_RATE_LIMITER: RateLimit
  TEST_RATE_LIMITER_HIGH: RateLimit
  TEST_ADMIN_RATE_LIMITER: RateLimit
  TEST_REFUSED_CREDENTIAL_LIMITER: RateLimit
}
const limitedEnv = {
  ...env,
  RATE_LIMITER: testBindings.TEST_RATE_LIMITER,
  RATE_LIMITER_HIGH: testBindings.TEST_RATE_LIMITER_HIGH,
  ADMIN_RATE_LIMITER: testBindings.TEST_ADMIN_RATE_LIMITER,
  REFUSED_CREDENTIAL_LIMITER: testBindings.TEST_REFUSED_CREDENTIAL_LIMITER,
  RATE_LIMIT_PERIOD_S: String(PERIOD_S),
}
const app = createApp()

async function send(
  method: string,
  path: string,
  options: { token?: string; ip?: string; body?: unknown; env?: object } = {},
) {
  const headers: Record<string, string> = {}
  if (options.token) headers.authorization = `Bearer ${options.token}`
  if (options.ip) headers['cf-connecting-ip'] = options.ip
  if (options.body !== undefined) headers['content-type'] = 'application/json'
  const ctx = createExecutionContext()
  const response = await app.fetch(
    new Request(`http://worker.test${path}`, {
      method,
      headers,
      ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
    }),
    options.env ?? limitedEnv,
    ctx,
  )
  const text = await response.text()
  await waitOnExecutionContext(ctx)
  return { status: response.status, json: JSON.parse(text), headers: response.headers }
}

/**
 * Miniflare's limiter counts in fixed windows of PERIOD_S seconds (epoch-aligned) and forgets at each edge; a
 * scenario that straddled an edge would see its budget refilled. Each takes well under a second, so start it clear
 * of the edge.
 */
async function clearOfWindowEdge() {
  const left = PERIOD_S * 1_000 - (Date.now() % (PERIOD_S * 1_000))
  // The limiter's windows are wall-clock time, so only time passing moves a scenario past the edge.
  if (left < 2_500) await new Promise((resolve) => setTimeout(resolve, left + 50))
}

function expectRateLimited(res: Awaited<ReturnType<typeof send>>) {
  expect(res.status).toBe(429)
  expect(res.json.error.code).toBe('rate_limited')
  expect(res.json.error.message).toMatch(/Retry-After/)
  const retryAfter = Number(res.headers.get('retry-after'))
  expect(Number.isInteger(retryAfter)).toBe(true)
  expect(retryAfter).toBeGreaterThanOrEqual(1)
  expect(retryAfter).toBeLessThanOrEqual(PERIOD_S)
}

/** `count` requests that no route answers (404, not 429), then one that must be refused. */
async function exhaustWith404(count: number, request: () => Promise<Awaited<ReturnType<typeof send>>>) {
  for (let i = 1; i <= count; i++) expect((await request()).status, `request ${i} of ${count}`).toBe(404)
  expectRateLimited(await request())
}

/** `count` requests that must all pass, then one that must be refused. */
async function exhaust(count: number, request: () => Promise<Awaited<ReturnType<typeof send>>>) {
  for (let i = 1; i <= count; i++) {
    const res = await request()
    expect(res.status, `request ${i} of ${count}: ${JSON.stringify(res.json)}`).toBeLessThan(400)
  }
  expectRateLimited(await request())
}

const RUBRICS: RunConfigInput = { anchor_rubrics: [{ text: 'The final answer is correct.' }] }
let sampleCounter = 0
const score = (token: string) =>
  send('POST', '/score', { token, body: { rollout: rollout(`rl-${++sampleCounter}`), metadata: METADATA } })

describe('rate limiting per caller', () => {
  it('answers the request past the limit with 429 rate_limited and Retry-After, not counting the rollout', async () => {
    const run = await createRun(RUBRICS)
    await clearOfWindowEdge()
    await exhaust(LIMIT.standard, () => score(run.token))
    // The refused /score was not recorded.
    expect(await ledgerRows(run.runId)).toBe(LIMIT.standard)
  })

  it("keys each run token apart: one run's burst does not throttle another", async () => {
    const [first, second] = [await createRun(RUBRICS), await createRun(RUBRICS)]
    await clearOfWindowEdge()
    await exhaust(LIMIT.standard, () => send('GET', '/rubric_status', { token: first.token }))
    expect((await send('GET', '/rubric_status', { token: second.token })).status).toBe(200)
    expectRateLimited(await send('GET', '/run', { token: first.token }))
  })

  it('keys callers without a token by IP on the open local default run', async () => {
    await clearOfWindowEdge()
    await exhaust(LIMIT.standard, () => send('GET', '/rubric_status', { ip: '203.0.113.7' }))
    expect((await send('GET', '/rubric_status', { ip: '203.0.113.8' })).status).toBe(200)
  })

  it('throttles guessed tokens per IP with a tighter budget of their own: 401 until spent, then 429', async () => {
    await clearOfWindowEdge()
    for (let i = 1; i <= LIMIT.refused; i++) {
      const res = await send('GET', '/rubric_status', { token: `rh_guess-${i}`, ip: '203.0.113.20' })
      expect(res.status).toBe(401)
      expect(res.json.error.code).toBe('unauthorized')
    }
    expectRateLimited(await send('GET', '/rubric_status', { token: 'rh_guess-last', ip: '203.0.113.20' }))
    // Another address still gets its plain 401, and a valid token from the throttled address is not refused.
    expect((await send('GET', '/rubric_status', { token: 'rh_guess-other', ip: '203.0.113.21' })).status).toBe(401)
    const run = await createRun(RUBRICS)
    expect((await send('GET', '/rubric_status', { token: run.token, ip: '203.0.113.20' })).status).toBe(200)
    // The guesses spent none of the address's budget for real traffic (the standard tier, 3).
    await exhaust(LIMIT.standard, () => send('GET', '/rubric_status', { ip: '203.0.113.20' }))
  })

  it('never limits /healthz, not even for a caller over its limit', async () => {
    await clearOfWindowEdge()
    await exhaust(LIMIT.standard, () => send('GET', '/run', { ip: '203.0.113.9' }))
    for (let i = 0; i < 3 * LIMIT.standard; i++)
      expect((await send('GET', '/healthz', { ip: '203.0.113.9' })).status).toBe(200)
    // The RM health probe neither (404: nothing was ever deployed on this target, but never 429).
    for (let i = 0; i < 3 * LIMIT.standard; i++)
      expect((await send('GET', '/rm/rl-target/healthz', { ip: '203.0.113.9' })).status).toBe(404)
  })

  it('counts the admin token apart: admin works while runs are throttled, and has its own limit', async () => {
    const run = await createRun(RUBRICS)
    await clearOfWindowEdge()
    await exhaust(LIMIT.standard, () => send('GET', '/run', { token: run.token }))
    await exhaust(LIMIT.admin, () => send('GET', `/runs/${run.runId}/run`, { token: ADMIN_TOKEN }))
    // The run's own budget is untouched by the admin's reads of it; a fresh run is unaffected by the admin's limit.
    const other = await createRun(RUBRICS)
    expect((await send('GET', '/run', { token: other.token })).status).toBe(200)
  })

  it('follows the run\'s rate_limit: "high" uses the larger tier, "off" is never limited', async () => {
    const [high, off] = [
      await createRun({ ...RUBRICS, rate_limit: 'high' }),
      await createRun({ ...RUBRICS, rate_limit: 'off' }),
    ]
    await clearOfWindowEdge()
    await exhaust(LIMIT.high, () => send('GET', '/rubric_status', { token: high.token }))
    for (let i = 0; i < 3 * LIMIT.high; i++)
      expect((await send('GET', '/rubric_status', { token: off.token })).status).toBe(200)
    expect((await send('GET', '/run', { token: off.token })).json.config.rate_limit).toBe('off')
  })

  it('counts a caller without a token against the tier of the run it addresses, resolved from /runs/<id>', async () => {
    const open = await createRun({ ...RUBRICS, access: 'open', rate_limit: 'high' })
    await clearOfWindowEdge()
    // The high tier (6), not the default run's standard tier (3): the limiter uses the run resolveRun resolved.
    await exhaust(LIMIT.high, () => send('GET', `/runs/${open.runId}/rubric_status`, { ip: '203.0.113.30' }))
    // The same address still has its own budget on the default run.
    expect((await send('GET', '/rubric_status', { ip: '203.0.113.30' })).status).toBe(200)
  })

  it('counts a request no route answers once (unknown path under /runs/<id>)', async () => {
    const open = await createRun({ ...RUBRICS, access: 'open' })
    await clearOfWindowEdge()
    for (let i = 1; i <= LIMIT.standard; i++)
      expect((await send('GET', `/runs/${open.runId}/no-such-route`, { ip: '203.0.113.31' })).status, `${i}`).toBe(404)
    expectRateLimited(await send('GET', `/runs/${open.runId}/no-such-route`, { ip: '203.0.113.31' }))
  })

  it('counts an unknown path under a prefix another group owns once, not again in the run API', async () => {
    const run = await createRun(RUBRICS)
    await clearOfWindowEdge()
    await exhaustWith404(LIMIT.standard, () => send('GET', '/lineage/no-such-route', { token: run.token }))
  })

  it('refuses an unknown rate_limit in a run config', async () => {
    const res = await send('POST', '/runs', {
      token: ADMIN_TOKEN,
      body: { config: { ...RUBRICS, rate_limit: 'unlimited' } },
      env,
    })
    expect(res.status).toBe(400)
    expect(res.json.error.details[0].path).toBe('config.rate_limit')
  })

  it('does not limit when the tier has no binding (a deployment without [[ratelimits]])', async () => {
    const run = await createRun(RUBRICS)
    const unbound = { ...limitedEnv, RATE_LIMITER: undefined }
    for (let i = 0; i < 3 * LIMIT.standard; i++)
      expect((await send('GET', '/run', { token: run.token, env: unbound })).status).toBe(200)
  })
})

describe('secondsToWindowEnd', () => {
  it('is the whole seconds left in the window, at least 1', () => {
    expect(secondsToWindowEnd(10, 1_700_000_003_500)).toBe(7)
    expect(secondsToWindowEnd(10, 1_700_000_000_000)).toBe(10)
    expect(secondsToWindowEnd(60, 1_700_000_039_999)).toBe(1)
    expect(secondsToWindowEnd(10, 1_700_000_009_999)).toBe(1)
  })
})
