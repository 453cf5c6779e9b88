import { env } from 'cloudflare:workers'
import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import { createApp } from '../../workers/app.ts'
import { ADMIN_TOKEN, METADATA, call, createRun, rollout } from './helpers.ts'

const RUBRICS = { anchor_rubrics: [{ text: 'The final answer is correct.' }] }

function expectError(res: { status: number; json: any }, status: number, code: string) {
  expect(res.status).toBe(status)
  expect(res.json.error.code).toBe(code)
  expect(res.json.error.message).toMatch(/\w{3,}/)
}

describe('bad input gets a clear 4xx and changes nothing', () => {
  it('refuses every malformed /score request and counts no rollout', async () => {
    const run = await createRun(RUBRICS)
    const score = (options: Parameters<typeof call>[2]) => call('POST', '/score', { token: run.token, ...options })

    const missing = await score({ body: { rollout: { id: 'x' } } })
    expectError(missing, 400, 'invalid_request')
    expect(missing.json.error.details.map((d: { path: string }) => d.path)).toEqual(expect.arrayContaining(['rollout.input', 'rollout.output', 'metadata']))

    const wrongType = await score({ body: { rollout: rollout('x'), metadata: { ...METADATA, current_step: 'zero' } } })
    expectError(wrongType, 400, 'invalid_request')
    expect(wrongType.json.error.message).toContain('metadata.current_step')

    expectError(await score({ raw: '{"rollout": ', headers: { 'content-type': 'application/json' } }), 400, 'invalid_json')
    expectError(await score({ raw: JSON.stringify({ rollout: rollout('x'), metadata: METADATA }), headers: { 'content-type': 'text/plain' } }), 415, 'unsupported_media_type')
    expectError(await score({ raw: JSON.stringify({ rollout: rollout('x'), metadata: METADATA }) }), 415, 'unsupported_media_type')

    const huge = JSON.stringify({ rollout: rollout('x', { output: 'y'.repeat(1024 * 1024 + 10) }), metadata: METADATA })
    expectError(await score({ raw: huge, headers: { 'content-type': 'application/json' } }), 413, 'payload_too_large')

    expectError(await score({ body: { rollout: rollout('x'), metadata: METADATA, instance_id: 'no spaces allowed' } }), 400, 'invalid_request')

    expectError(await call('POST', '/runs/no-such-run/score', { token: ADMIN_TOKEN, body: { rollout: rollout('x'), metadata: METADATA } }), 404, 'run_not_found')
    expectError(await call('POST', '/score', { token: 'rh_not-a-real-token', body: { rollout: rollout('x'), metadata: METADATA } }), 401, 'unauthorized')
    expectError(await call('POST', '/score', { headers: { authorization: 'Basic abc' }, body: { rollout: rollout('x'), metadata: METADATA } }), 401, 'unauthorized')

    const status = await call('GET', '/rubric_status', { token: run.token })
    expect(status.json).toMatchObject({ status: 'idle', rollouts: 0 })
    const events = await env.DB.prepare('SELECT count(*) AS n FROM score_events WHERE run_id = ?').bind(run.runId).first<{ n: number }>()
    expect(events?.n).toBe(0)
  })

  it('refuses bad query parameters and unknown routes', async () => {
    expectError(await call('GET', '/rubric_status/wait?timeout_s=soon'), 400, 'invalid_request')
    expectError(await call('GET', '/rubric_status/wait?timeout_s=-1'), 400, 'invalid_request')
    expectError(await call('GET', '/rubrics?instance_id=../../etc'), 400, 'invalid_request')
    expectError(await call('GET', '/rubrics?instance_id=other'), 404, 'not_found')
    expectError(await call('GET', '/nope'), 404, 'not_found')
  })

  it('refuses a run config that would not work, naming the field', async () => {
    const empty = await call('POST', '/runs', { token: ADMIN_TOKEN, body: { config: {} } })
    expectError(empty, 400, 'invalid_request')
    expect(empty.json.error.message).toContain('anchor_rubrics')
    const badMode = await call('POST', '/runs', { token: ADMIN_TOKEN, body: { config: { ...RUBRICS, mode: 'fast' } } })
    expectError(badMode, 400, 'invalid_request')
    expect(badMode.json.error.details[0].path).toBe('config.mode')
    expectError(await call('POST', '/runs', { token: ADMIN_TOKEN, body: { run_id: 'Bad Id', config: RUBRICS } }), 400, 'invalid_request')
    expectError(await call('POST', '/runs', { token: ADMIN_TOKEN, body: { run_id: 'default', config: RUBRICS } }), 409, 'run_exists')
  })
})

describe('the default run outside local development', () => {
  const production = { ...env, DEPLOYMENT: 'production' }
  const app = createApp()
  const send = async (headers: Record<string, string> = {}) => {
    const ctx = createExecutionContext()
    const response = await app.fetch(
      new Request('http://worker.test/score', { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ rollout: rollout('prod-1'), metadata: METADATA }) }),
      production,
      ctx,
    )
    await waitOnExecutionContext(ctx)
    return { status: response.status, json: (await response.json()) as any }
  }

  it('needs a token in production', async () => {
    expectError(await send(), 401, 'unauthorized')
    expect((await send({ authorization: `Bearer ${ADMIN_TOKEN}` })).status).toBe(200)
  })

  it('lets an operator open a run explicitly with access: open', async () => {
    const run = await createRun({ ...RUBRICS, access: 'open' })
    const res = await call('POST', `/runs/${run.runId}/score`, { body: { rollout: rollout('open-1'), metadata: METADATA } })
    expect(res.status).toBe(200)
  })
})

describe('secrets', () => {
  it('refuses a run whose config names a secret the Worker lacks, without echoing any key', async () => {
    const res = await call('POST', '/runs', {
      token: ADMIN_TOKEN,
      body: { config: { ...RUBRICS, agents: { default: { backend: 'openai', base_url: 'http://127.0.0.1:9/v1', api_key_env: 'SCORER_KEY' } } } },
    })
    expectError(res, 400, 'invalid_request')
    expect(res.json.error.message).toContain('SCORER_KEY')
    expect(res.text).not.toContain(ADMIN_TOKEN)
  })
})
