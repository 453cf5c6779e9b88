/**
 * The budgets a run token cannot exceed (issue 39 item 3): distinct instances per step, step updates per window, and
 * LLM calls per rollout's judgement. Each refuses with a 429 whose code names the budget and whose `details.budget`
 * names its config key; before them a token chose how many instances a step updated, how often, and how many calls a
 * judgement took.
 */
import { afterEach, describe, expect, it } from 'vitest'
import {
  METADATA,
  call,
  clearFakeEndpoints,
  createRun,
  expectStatus,
  fakeEndpoint,
  fakeRole,
  rollout,
} from './helpers.ts'

const RUBRICS = { anchor_rubrics: [{ text: 'The final answer is correct.' }] }

type Run = { runId: string; token: string }

afterEach(() => clearFakeEndpoints())

function score(run: Run, id: string, options: { instance?: string; step?: number; input?: string } = {}) {
  return call('POST', '/score', {
    token: run.token,
    body: {
      rollout: rollout(id, options.input ? { input: options.input } : {}),
      metadata: { ...METADATA, current_step: options.step ?? 0 },
      ...(options.instance ? { instance_id: options.instance } : {}),
    },
  })
}

/** The run's LLM calls by role, as `GET /llm_calls` sums them. */
async function readCallsByRole(run: Run): Promise<Record<string, number>> {
  const { json } = await call('GET', '/llm_calls', { token: run.token })
  const byRole: Record<string, number> = {}
  for (const group of json.calls as { role: string; calls: number }[])
    byRole[group.role] = (byRole[group.role] ?? 0) + group.calls
  return byRole
}

/**
 * `/llm_calls` by role once every isolate's counts have reached the run: they are handed over at most once a second
 * after the request that made them has answered, so the read is taken again until two reads 1.5 s apart agree.
 */
async function callsByRole(run: Run): Promise<Record<string, number>> {
  let last = await readCallsByRole(run)
  for (let read = 0; read < 20; read++) {
    await new Promise((resolve) => setTimeout(resolve, 1_500))
    const next = await readCallsByRole(run)
    if (JSON.stringify(next) === JSON.stringify(last)) return next
    last = next
  }
  return last
}

const total = (byRole: Record<string, number>, except = '') =>
  Object.entries(byRole).reduce((sum, [role, calls]) => (role === except ? sum : sum + calls), 0)

describe('budgets.instances_per_step', () => {
  it('refuses a rollout of one instance more than the budget with a 429 naming it, until the step closes', async () => {
    const run = await createRun({ ...RUBRICS, rubrics_mode: 'per_instance', budgets: { instances_per_step: 2 } })
    expect((await score(run, 'a-1', { instance: 'a' })).status).toBe(200)
    expect((await score(run, 'b-1', { instance: 'b' })).status).toBe(200)
    const refused = await score(run, 'c-1', { instance: 'c' })
    expect(refused.status, refused.text).toBe(429)
    expect(refused.json.error).toMatchObject({
      code: 'instance_budget_exceeded',
      details: { budget: 'budgets.instances_per_step', limit: 2, step: 0 },
    })
    expect(refused.json.error.message).toContain('budgets.instances_per_step')
    expect(refused.json).not.toHaveProperty('score')
    // The step's own instances go on; the refused rollout was never recorded.
    expect((await score(run, 'a-2', { instance: 'a' })).json).toMatchObject({ step: 0, duplicate: false })
    await expectStatus(run.token, { step: 0, rollouts: 3 })
    expect((await call('POST', '/complete', { token: run.token })).json).toMatchObject({ closed: true })
    // The next step has room: the same rollout is taken there, as new.
    expect((await score(run, 'c-1', { instance: 'c' })).json).toMatchObject({ step: 1, duplicate: false })
  })

  it('holds in a run that closes steps by count', async () => {
    const run = await createRun({
      ...RUBRICS,
      rubrics_mode: 'per_instance',
      rollouts_per_step: 10,
      budgets: { instances_per_step: 1 },
    })
    expect((await score(run, 'a-1', { instance: 'a' })).status).toBe(200)
    const refused = await score(run, 'b-1', { instance: 'b' })
    expect(refused.status, refused.text).toBe(429)
    expect(refused.json.error.details.budget).toBe('budgets.instances_per_step')
  })

  it("bounds what one token's rollouts under fresh instance ids cost: one update per admitted instance", async () => {
    const run = await createRun({ ...RUBRICS, rubrics_mode: 'per_instance', budgets: { instances_per_step: 3 } })
    const sent = 8
    const answers = []
    for (let i = 0; i < sent; i++)
      answers.push((await score(run, `fresh-${i}`, { instance: `prompt-${i}`, input: `What is ${i}+${i}?` })).status)
    expect(answers.filter((status) => status === 200)).toHaveLength(3)
    expect(answers.filter((status) => status === 429)).toHaveLength(sent - 3)
    expect((await call('POST', '/complete', { token: run.token })).json).toMatchObject({ closed: true })
    const waited = await call('GET', '/rubric_status/wait?timeout_s=60', { token: run.token })
    expect(waited.json).toMatchObject({ status: 'updated', instances: expect.any(Array) })
    expect(waited.json.instances).toHaveLength(3)
    const byRole = await callsByRole(run)
    // Each rollout sent was judged once (a refused one too: the budget is kept where its instance joins the step);
    // only the three admitted instances were analysed and updated.
    expect(byRole.scorer).toBeLessThanOrEqual(sent + 3)
    expect(byRole.analyzer).toBe(3)
    expect(byRole.updater).toBe(3)
    console.log(
      `[budgets] ${sent} rollouts under ${sent} instance ids, instances_per_step 3: ${total(byRole)} LLM calls ` +
        `(${(total(byRole) / sent).toFixed(2)} per rollout): ${JSON.stringify(byRole)}`,
    )
  })
})

describe('budgets.updates_per_window', () => {
  it('answers a /complete past the budget 429 with Retry-After; an automatic close skips the update', async () => {
    const run = await createRun({ ...RUBRICS, budgets: { updates_per_window: 1, update_window_s: 60 } })
    expect((await score(run, 'u-0')).status).toBe(200)
    expect((await call('POST', '/complete', { token: run.token })).json).toMatchObject({ closed: true, step: 0 })
    expect((await call('GET', '/rubric_status/wait?timeout_s=60', { token: run.token })).json.status).toBe('updated')

    expect((await score(run, 'u-1')).json.step).toBe(1)
    const refused = await call('POST', '/complete', { token: run.token })
    expect(refused.status, refused.text).toBe(429)
    expect(refused.json.error).toMatchObject({
      code: 'update_budget_exceeded',
      details: { budget: 'budgets.updates_per_window', limit: 1, window_s: 60 },
    })
    expect(refused.json.error.message).toContain('budgets.updates_per_window')
    const retryAfter = Number(refused.headers.get('retry-after'))
    expect(retryAfter).toBeGreaterThan(0)
    expect(retryAfter).toBeLessThanOrEqual(60)
    // Nothing closed: the step keeps its rollout and goes on collecting.
    await expectStatus(run.token, { step: 1, status: 'collecting', rollouts: 1 })
    expect((await score(run, 'u-2')).json.step).toBe(1)

    const before = await callsByRole(run)
    // A rollout of a later trainer step closes step 1 all the same, with its update skipped: no LLM call, no version.
    expect((await score(run, 'u-3', { step: 1 })).json.step).toBe(2)
    const waited = await call('GET', '/rubric_status/wait?timeout_s=60', { token: run.token })
    expect(waited.json).toMatchObject({
      step: 1,
      status: 'updated',
      rollouts: 2,
      closed_by: 'step_advance',
      update_skipped: 'budgets.updates_per_window',
    })
    expect(waited.json.instances[0].update).toMatchObject({ skipped: 'budgets.updates_per_window', changed: false })
    const after = await callsByRole(run)
    expect(total(after, 'scorer')).toBe(total(before, 'scorer'))
  })
})

describe('budgets.judge_calls_per_rollout', () => {
  it("cuts a scorer's retries to the budget and answers a 429 naming it, never a score", async () => {
    const endpoint = fakeEndpoint('budget-judge', async () => 'not a grade')
    const run = await createRun({
      ...RUBRICS,
      agents: { scorer: { ...fakeRole('budget-judge'), max_attempts: 10, timeout_ms: 1_000 } },
      budgets: { judge_calls_per_rollout: 3 },
    })
    const refused = await score(run, 'j-1')
    expect(refused.status, refused.text).toBe(429)
    expect(refused.json.error).toMatchObject({
      code: 'judge_budget_exceeded',
      details: { budget: 'budgets.judge_calls_per_rollout', limit: 3, calls: 3 },
    })
    expect(refused.json.error.message).toContain('invalid_reply')
    expect(refused.headers.get('retry-after')).toBeNull()
    expect(endpoint.calls()).toBe(3)
  })

  it("counts a relative group's attempts against each response: the pointwise fallback gets the rest", async () => {
    const endpoint = fakeEndpoint('budget-judge-group', async () => 'not a grade')
    const run = await createRun({
      ...RUBRICS,
      group_scoring: 'relative',
      agents: { scorer: { ...fakeRole('budget-judge-group'), max_attempts: 4, timeout_ms: 1_000 } },
      budgets: { judge_calls_per_rollout: 5 },
    })
    const refused = await call('POST', '/score/group', {
      token: run.token,
      body: { prompt: 'What is 2+2?', responses: ['4', '5'], metadata: METADATA },
    })
    expect(refused.status, refused.text).toBe(429)
    expect(refused.json.error).toMatchObject({
      code: 'judge_budget_exceeded',
      details: { budget: 'budgets.judge_calls_per_rollout' },
    })
    // The group's call, 4 attempts, then one pointwise call each (not 4 each): 6, where 12 were made before.
    expect(endpoint.calls()).toBe(6)
  })

  it("leaves a scorer's max_attempts below the budget as it was: its own failure, not the budget's", async () => {
    const endpoint = fakeEndpoint('budget-judge-within', async () => 'not a grade')
    const run = await createRun({
      ...RUBRICS,
      agents: { scorer: { ...fakeRole('budget-judge-within'), max_attempts: 2, timeout_ms: 1_000 } },
    })
    const failed = await score(run, 'j-2')
    expect(failed.json.error.code).toBe('llm_unavailable')
    expect(endpoint.calls()).toBe(2)
  })
})
