import { env } from 'cloudflare:workers'
import { describe, expect, it, vi } from 'vitest'
import { coordinatorName } from '../../durable-objects/names.ts'
import { ADMIN_TOKEN, METADATA, call, createRun, expectStatus, rollout } from './helpers.ts'

const BASE_RUBRICS = {
  anchor_rubrics: [{ id: 'a-correct', text: 'The final answer is correct.', weight: 2 }],
  adaptive_rubrics: [{ id: 'd-steps', text: 'Shows the key steps.' }],
}

describe('POST /score on the default run', () => {
  it('answers the README example with a score in [0,1], a rubric version and one grade per rubric', async () => {
    const res = await call('POST', '/score', { body: { rollout: rollout('readme-1'), metadata: METADATA } })
    expect(res.status).toBe(200)
    expect(res.json.score).toBeGreaterThanOrEqual(0)
    expect(res.json.score).toBeLessThanOrEqual(1)
    expect(res.json.rubric_version).toBe(1)
    expect(res.json.instance_id).toBe('global')
    expect(res.json.criteria.map((c: { rubric_id: string }) => c.rubric_id)).toEqual([
      'anchor-correctness',
      'anchor-instructions',
      'adaptive-reasoning',
      'adaptive-concise',
    ])
    expect(res.json.request_id).toMatch(/\S+/)
  })

  it('scores a right answer above a wrong one (mock heuristic)', async () => {
    const right = await call('POST', '/score', {
      body: {
        rollout: rollout('cmp-right', { input: 'Capital of France?', output: 'Paris', supplemental_context: 'Paris' }),
        metadata: METADATA,
      },
    })
    const wrong = await call('POST', '/score', {
      body: {
        rollout: rollout('cmp-wrong', { input: 'Capital of France?', output: 'Lyon', supplemental_context: 'Paris' }),
        metadata: METADATA,
      },
    })
    expect(right.json.score).toBeGreaterThan(wrong.json.score)
  })
})

describe('idempotency', () => {
  it('returns the first score for a rollout id seen twice in a step and counts it once', async () => {
    const run = await createRun(BASE_RUBRICS)
    const first = await call('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('dup'), metadata: METADATA },
    })
    const second = await call('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('dup', { output: 'five' }), metadata: METADATA },
    })
    expect(second.status).toBe(200)
    expect(second.json.score).toBe(first.json.score)
    expect(first.json.duplicate).toBe(false)
    expect(second.json.duplicate).toBe(true)
    await expectStatus(run.token, { status: 'collecting', step: 0, rollouts: 1 })
  })

  it('counts concurrent requests for one rollout id once, all with the same score', async () => {
    const run = await createRun(BASE_RUBRICS)
    const answers = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        call('POST', '/score', {
          token: run.token,
          body: { rollout: rollout('race', { output: `answer ${i}` }), metadata: METADATA },
        }),
      ),
    )
    expect(answers.every((a) => a.status === 200)).toBe(true)
    expect(new Set(answers.map((a) => a.json.score)).size).toBe(1)
    expect(answers.filter((a) => !a.json.duplicate)).toHaveLength(1)
    await expectStatus(run.token, { rollouts: 1 })
  })

  it('serves identical content under a new rollout id from the score cache', async () => {
    const run = await createRun(BASE_RUBRICS)
    const first = await call('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('c1'), metadata: METADATA },
    })
    const second = await call('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('c2'), metadata: METADATA },
    })
    expect(first.json.cached).toBe(false)
    expect(second.json).toMatchObject({ cached: true, duplicate: false, score: first.json.score })
    await expectStatus(run.token, { rollouts: 2 })
  })
})

describe('steps', () => {
  it('moves idle → collecting → updated with /complete and releases /rubric_status/wait', async () => {
    const run = await createRun(BASE_RUBRICS)
    await expectStatus(run.token, { status: 'idle', step: 0, pending: 0 })
    await call('POST', '/score', { token: run.token, body: { rollout: rollout('s1'), metadata: METADATA } })
    await call('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('s2', { output: '5' }), metadata: METADATA },
    })
    await expectStatus(run.token, { status: 'collecting', rollouts: 2 })
    expect((await call('POST', '/complete', { token: run.token })).json).toMatchObject({
      status: 'complete',
      step: 0,
      closed: true,
    })
    const waited = await call('GET', '/rubric_status/wait?timeout_s=10', { token: run.token })
    expect(waited.status).toBe(200)
    expect(waited.json).toMatchObject({ status: 'updated', mode: 'async', step: 0, pending: 0 })
    // The next score opens step 1.
    const next = await call('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('s3'), metadata: { ...METADATA, current_step: 1 } },
    })
    expect(next.json).toMatchObject({ step: 1, duplicate: false })
    await expectStatus(run.token, { status: 'collecting', step: 1, rollouts: 1 })
  })

  it('closes the step on the 4th distinct rollout when rollouts_per_step = 4, and /complete is a noop', async () => {
    const run = await createRun({ ...BASE_RUBRICS, rollouts_per_step: 4 })
    for (const id of ['p1', 'p2', 'p3'])
      await call('POST', '/score', {
        token: run.token,
        body: { rollout: rollout(id, { output: id }), metadata: METADATA },
      })
    await call('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('p3', { output: 'p3' }), metadata: METADATA },
    })
    await expectStatus(run.token, { status: 'collecting', rollouts: 3 })
    const fourth = await call('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('p4', { output: 'p4' }), metadata: METADATA },
    })
    expect(fourth.json.step).toBe(0)
    expect((await call('POST', '/complete', { token: run.token })).json).toMatchObject({ status: 'noop' })
    const waited = await call('GET', '/rubric_status/wait?timeout_s=10', { token: run.token })
    expect(waited.status).toBe(200)
    expect(waited.json).toMatchObject({ status: 'updated', step: 0, rollouts: 4 })
    const fifth = await call('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('p5', { output: 'p5' }), metadata: METADATA },
    })
    expect(fifth.json.step).toBe(1)
  })

  it('answers 202 with the current status when the wait times out, clamped to the run maximum', async () => {
    const run = await createRun({ ...BASE_RUBRICS, max_wait_s: 1 })
    await call('POST', '/score', { token: run.token, body: { rollout: rollout('w1'), metadata: METADATA } })
    const waited = await call('GET', '/rubric_status/wait?timeout_s=600', { token: run.token })
    expect(waited.status).toBe(202)
    expect(waited.json).toMatchObject({ status: 'collecting', timed_out: true, waited_s_max: 1 })
  })

  it('returns at once from the wait when nothing is pending', async () => {
    const run = await createRun(BASE_RUBRICS)
    const waited = await call('GET', '/rubric_status/wait?timeout_s=30', { token: run.token })
    expect(waited.status).toBe(200)
    expect(waited.json.status).toBe('updated')
  })

  it('holds a sync-mode score until the step is updated, then answers on the newest rubrics', async () => {
    const run = await createRun({ ...BASE_RUBRICS, mode: 'sync' })
    let settled = false
    const pending = call('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('sync-1'), metadata: METADATA },
    }).then((res) => {
      settled = true
      return res
    })
    await expectStatus(run.token, { rollouts: 1 })
    expect(settled).toBe(false)
    await call('POST', '/complete', { token: run.token })
    const res = await pending
    expect(res.status).toBe(200)
    expect(res.json.update_pending).toBeUndefined()
    const current = await call('GET', '/rubrics', { token: run.token })
    expect(res.json).toMatchObject({ step: 0, rubric_version: current.json.rubric_version })
    const currentIds = [...current.json.anchor_rubrics, ...current.json.adaptive_rubrics].map(
      (r: { id: string }) => r.id,
    )
    expect(res.json.criteria.map((c: { rubric_id: string }) => c.rubric_id)).toEqual(currentIds)
  })
})

describe('per_instance rubrics', () => {
  it('puts two different inputs in two instances with separate rubric sets', async () => {
    const run = await createRun({
      ...BASE_RUBRICS,
      rubrics_mode: 'per_instance',
      instance_rubrics: { 'geo-1': [{ id: 'g-capital', text: 'Names the capital city.' }] },
    })
    const a = await call('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('i1', { input: 'What is 2+2?' }), metadata: METADATA },
    })
    const b = await call('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('i2', { input: 'What is 3+3?', output: '6' }), metadata: METADATA },
    })
    const again = await call('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('i3', { input: 'What is 2+2?', output: 'four' }), metadata: METADATA },
    })
    const geo = await call('POST', '/score', {
      token: run.token,
      body: {
        rollout: rollout('i4', { input: 'Capital of France?', output: 'Paris' }),
        metadata: METADATA,
        instance_id: 'geo-1',
      },
    })
    expect(a.json.instance_id).toMatch(/^in-[0-9a-f]{16}$/)
    expect(b.json.instance_id).not.toBe(a.json.instance_id)
    expect(again.json.instance_id).toBe(a.json.instance_id)
    expect(geo.json.instance_id).toBe('geo-1')

    const geoRubrics = await call('GET', '/rubrics?instance_id=geo-1', { token: run.token })
    const mathRubrics = await call('GET', `/rubrics?instance_id=${a.json.instance_id}`, { token: run.token })
    expect(geoRubrics.json.adaptive_rubrics.map((r: { id: string }) => r.id)).toEqual(['g-capital'])
    expect(mathRubrics.json.adaptive_rubrics.map((r: { id: string }) => r.id)).toEqual(['d-steps'])
    expect(geoRubrics.json.anchor_rubrics.map((r: { id: string }) => r.id)).toEqual(['a-correct'])
    expect(geo.json.criteria.map((c: { rubric_id: string }) => c.rubric_id)).toEqual(['a-correct', 'g-capital'])

    const listing = await call('GET', '/rubrics', { token: run.token })
    expect(listing.json.instances.map((i: { instance_id: string }) => i.instance_id).sort()).toEqual(
      [a.json.instance_id, b.json.instance_id, 'geo-1'].sort(),
    )
    const status = await expectStatus(run.token, { rollouts: 4 })
    expect(status.instances).toHaveLength(3)
  })
})

describe('runs and tokens', () => {
  it('creates runs only with the admin token, and scopes each token to its run', async () => {
    expect((await call('POST', '/runs', { body: { config: BASE_RUBRICS } })).json.error.code).toBe('unauthorized')
    const one = await createRun(BASE_RUBRICS)
    const two = await createRun(BASE_RUBRICS)
    const byToken = await call('POST', '/score', {
      token: one.token,
      body: { rollout: rollout('t1'), metadata: METADATA },
    })
    expect(byToken.json.run_id).toBe(one.runId)
    const byPath = await call('POST', `/runs/${one.runId}/score`, {
      token: one.token,
      body: { rollout: rollout('t2', { output: 'x' }), metadata: METADATA },
    })
    expect(byPath.json.run_id).toBe(one.runId)
    const crossed = await call('POST', `/runs/${two.runId}/score`, {
      token: one.token,
      body: { rollout: rollout('t3'), metadata: METADATA },
    })
    expect(crossed.status).toBe(403)
    expect(crossed.json.error.code).toBe('forbidden')
    const admin = await call('GET', `/runs/${two.runId}/rubric_status`, { token: ADMIN_TOKEN })
    expect(admin.json).toMatchObject({ run_id: two.runId, rollouts: 0 })
    expect(
      (await call('POST', '/runs', { token: ADMIN_TOKEN, body: { run_id: one.runId, config: BASE_RUBRICS } })).status,
    ).toBe(409)
  })

  it('keeps a created run closed to callers without a token', async () => {
    const run = await createRun(BASE_RUBRICS)
    const res = await call('POST', `/runs/${run.runId}/score`, {
      body: { rollout: rollout('anon'), metadata: METADATA },
    })
    expect(res.status).toBe(401)
    expect(res.json.error.code).toBe('unauthorized')
  })

  it('stores run tokens hashed, never in clear', async () => {
    const run = await createRun(BASE_RUBRICS)
    const rows = await env.DB.prepare('SELECT token_hash FROM run_tokens WHERE run_id = ?')
      .bind(run.runId)
      .all<{ token_hash: string }>()
    expect(rows.results).toHaveLength(1)
    expect(rows.results[0]!.token_hash).toMatch(/^[0-9a-f]{64}$/)
    expect(rows.results[0]!.token_hash).not.toContain(run.token)
  })
})

describe('per-step aggregates', () => {
  it("sums each step's scores and the scorer's LLM calls in the run's coordinator, not a row per event", async () => {
    const run = await createRun(BASE_RUBRICS)
    const res = await call('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('agg-1'), metadata: METADATA },
    })
    await call('POST', '/score', { token: run.token, body: { rollout: rollout('agg-1'), metadata: METADATA } })
    const coordinator = env.RUN_COORDINATOR.getByName(coordinatorName(run.runId))
    await vi.waitFor(
      async () => {
        const [step] = await coordinator.timeline()
        expect(step).toMatchObject({
          step: 0,
          status: 'collecting',
          rollouts: 1,
          tally: { rollouts: 1, score_sum: res.json.score, min_version: 1, max_version: 1 },
        })
        expect(step!.tally.bins.reduce((sum, count) => sum + count, 0)).toBe(1)
        expect(await coordinator.llmCalls()).toEqual([
          expect.objectContaining({ role: 'scorer', outcome: 'ok', model: 'mock:mock-heuristic-1', calls: 1 }),
        ])
        // The calls reach the coordinator from the isolate's once-a-second flush (countLlmCalls).
      },
      { timeout: 5_000, interval: 50 },
    )
  })
})

describe('step boundaries', () => {
  it('answers a rollout id sent again right after /complete with its first answer, per instance', async () => {
    const run = await createRun({ ...BASE_RUBRICS, rubrics_mode: 'per_instance' })
    const send = (id: string, input: string) =>
      call('POST', '/score', { token: run.token, body: { rollout: rollout(id, { input }), metadata: METADATA } })
    await send('0', 'What is 2+2?')
    await send('1', 'What is 3+3?')
    await call('POST', '/complete', { token: run.token })
    const [again0, again1] = await Promise.all([send('0', 'What is 2+2?'), send('1', 'What is 3+3?')])
    expect(again0.json).toMatchObject({ step: 0, duplicate: true })
    expect(again1.json).toMatchObject({ step: 0, duplicate: true })
    expect(again0.json.instance_id).not.toBe(again1.json.instance_id)
  })
})
