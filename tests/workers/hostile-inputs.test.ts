/**
 * The inputs of the hidden bad-input corpus that still passed (issue 31 item 5), in workerd: a memory search text over
 * MAX_MEMORY_QUERY_CHARS is refused before it is embedded (API and dashboard), the dashboard answers a client that asks
 * for JSON with the API's JSON error, and no echoed path carries a token.
 */
import { describe, expect, it } from 'vitest'
import { MAX_MEMORY_QUERY_CHARS } from '../../workers/routes/memory.ts'
import { ADMIN_TOKEN, call, createRun } from './helpers.ts'

const JSON_CLIENT = { accept: 'application/json' }

describe('memory search text', () => {
  it('refuses a 50,000-character q with 400 invalid_request naming the limit; takes one at the limit', async () => {
    const run = await createRun({ anchor_rubrics: [{ text: 'Correct.' }] })
    const long = await call('GET', `/memory?q=${'x'.repeat(50_000)}`, { token: run.token })
    expect(long.status).toBe(400)
    expect(long.json.error.code).toBe('invalid_request')
    expect(long.json.error.message).toContain(String(MAX_MEMORY_QUERY_CHARS))
    const atLimit = await call('GET', `/memory?q=${'x'.repeat(MAX_MEMORY_QUERY_CHARS)}`, { token: run.token })
    expect(atLimit.status).toBe(200)
    const page = await call('GET', `/dashboard/runs/${run.runId}?q=${'x'.repeat(50_000)}`, {
      token: ADMIN_TOKEN,
      headers: { accept: 'text/html' },
    })
    expect(page.status).toBe(400)
    expect(page.text).toContain(String(MAX_MEMORY_QUERY_CHARS))
  })
})

describe('errors a client asked for as JSON', () => {
  it('the dashboard answers an unknown run with the JSON 404 of every other route', async () => {
    const res = await call('GET', '/dashboard/runs/no-such-run', { token: ADMIN_TOKEN, headers: JSON_CLIENT })
    expect(res.status).toBe(404)
    expect(res.headers.get('content-type')).toMatch(/^application\/json/)
    expect(res.json.error.code).toBe('run_not_found')
    expect(res.json.request_id).toEqual(expect.any(String))
    const page = await call('GET', '/dashboard/runs/no-such-run', {
      token: ADMIN_TOKEN,
      headers: { accept: 'text/html' },
    })
    expect(page.headers.get('content-type')).toMatch(/^text\/html/)
  })

  it('an unknown dashboard page is a JSON 404 too', async () => {
    const missing = await call('GET', '/dashboard/nowhere', { headers: JSON_CLIENT })
    expect([missing.status, missing.json?.error.code]).toEqual([404, 'not_found'])
  })
})

describe('echoed paths', () => {
  it('a second path token is never echoed in a 404', async () => {
    const second = 'rh_second-token-never-echoed'
    const api = await call('GET', `/t/${ADMIN_TOKEN}/t/${second}/nowhere`)
    expect(api.status).toBe(404)
    expect(api.text).not.toContain(second)
    expect(api.json.error.message).toContain('/t/<token>/nowhere')
    const page = await call('GET', `/t/${ADMIN_TOKEN}/dashboard/t/${second}/x`, { headers: JSON_CLIENT })
    expect(page.status).toBe(404)
    expect(page.text).not.toContain(second)
  })
})
