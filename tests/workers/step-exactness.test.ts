/**
 * The step protocol's findings, each as what a trainer and the archive must see. A counted step
 * (`rollouts_per_step`) holds exactly N distinct rollouts whatever the trainer sends: identical answers in one group
 * or batch, a rollout id repeated in a batch, twins in flight at once, and a rollout too large to store among its
 * neighbours (read from the archive, which distillation and audits read, not from the answers alone). A sync retry
 * keeps its first answer; `/rubric_status` keeps a finished step in view.
 */
import { runInDurableObject } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { ledgerName } from '../../durable-objects/names.ts'
import { ArchivedRollout } from '../../src/schemas/archive.ts'
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

const RUBRICS = {
  anchor_rubrics: [{ id: 'a-correct', text: 'The final answer is correct.', weight: 2 }],
  adaptive_rubrics: [{ id: 'd-steps', text: 'Shows the key steps of the calculation.' }],
}

type Run = { runId: string; token: string }

/** Every archived rollout of the run's `steps` first steps, by step: waits until each step holds `perStep`. */
async function archivedSteps(run: Run, steps: number, perStep: number): Promise<Map<number, ArchivedRollout[]>> {
  let bySteps = new Map<number, ArchivedRollout[]>()
  await vi.waitFor(
    async () => {
      const listed = await env.ARCHIVE!.list({ prefix: `runs/${run.runId}/steps/` })
      const lines = (
        await Promise.all(listed.objects.map(async (object) => (await env.ARCHIVE!.get(object.key))!.text()))
      )
        .join('')
        .split('\n')
        .filter((line) => line.trim() !== '')
        .map((line) => ArchivedRollout.parse(JSON.parse(line)))
      bySteps = new Map()
      for (const line of lines) bySteps.set(line.step, [...(bySteps.get(line.step) ?? []), line])
      for (let step = 0; step < steps; step++) expect(bySteps.get(step)?.length ?? 0).toBe(perStep)
    },
    { timeout: 15_000, interval: 100 },
  )
  return bySteps
}

const countedRun = (perStep: number, extra: Record<string, unknown> = {}) =>
  createRun({ ...RUBRICS, rollouts_per_step: perStep, archive: true, ledger_retention_steps: 0, ...extra })

describe('a counted step', () => {
  it('of 4 holds the 4 identical answers of one /score/group, each a rollout of its own', async () => {
    const run = await countedRun(4)
    const group = await call('POST', '/score/group', {
      token: run.token,
      body: { prompt: 'What is 2+2?', responses: ['C', 'C', 'C', 'C'], reference: '4' },
    })
    expect(group.status, group.text).toBe(200)
    expect(new Set(group.json.rollout_ids).size).toBe(4)
    const archived = await archivedSteps(run, 1, 4)
    expect(new Set(archived.get(0)!.map((line) => line.rollout_id))).toEqual(new Set(group.json.rollout_ids))
    // The same group sent again is the same 4 rollouts: their first answers, nothing written.
    const again = await call('POST', '/score/group', {
      token: run.token,
      body: { prompt: 'What is 2+2?', responses: ['C', 'C', 'C', 'C'], reference: '4' },
    })
    expect(again.json.scores).toEqual(group.json.scores)
    expect(again.json.rollout_ids).toEqual(group.json.rollout_ids)
  })

  it('of 4 holds 4 distinct rollouts when a /score/batch repeats ids: a copy is its rollout, not a seat', async () => {
    const run = await countedRun(4)
    const items = ['x', 'x', 'y', 'x', 'z', 'y', 'w'].map((id) => ({
      rollout: rollout(id, { output: `The answer is 4 (${id}).` }),
      metadata: METADATA,
    }))
    const batch = await call('POST', '/score/batch', { token: run.token, body: { items } })
    expect(batch.status, batch.text).toBe(200)
    const results = batch.json.results as { rollout_id: string; step: number; duplicate: boolean; score: number }[]
    expect(results.map((result) => result.duplicate)).toEqual([false, true, false, true, false, true, false])
    expect(results.filter((result) => result.rollout_id === 'x').map((result) => result.score)).toEqual(
      Array(3).fill(results[0]!.score),
    )
    const archived = await archivedSteps(run, 1, 4)
    expect(
      archived
        .get(0)!
        .map((line) => line.rollout_id)
        .sort(),
    ).toEqual(['w', 'x', 'y', 'z'])
  })

  it('of 3 holds 3 distinct rollouts when twins of each arrive at once: one row and one seat an id', async () => {
    const run = await countedRun(3, { ledger_shards: 1 })
    const twins = ['a', 'a', 'b', 'b', 'c', 'c']
    const answers = await Promise.all(
      twins.map((id) =>
        call('POST', '/score', { token: run.token, body: { rollout: rollout(id), metadata: METADATA } }),
      ),
    )
    for (const answer of answers) expect(answer.status, answer.text).toBe(200)
    expect(answers.filter((answer) => answer.json.duplicate).length).toBe(3)
    expect(answers.every((answer) => answer.json.step === 0)).toBe(true)
    const archived = await archivedSteps(run, 1, 3)
    expect(
      archived
        .get(0)!
        .map((line) => line.rollout_id)
        .sort(),
    ).toEqual(['a', 'b', 'c'])
  })

  it('refuses a rollout too large to store alone (413 naming the limit); the rest and the step are whole', async () => {
    const run = await countedRun(2, { ledger_shards: 1 })
    // 200,000 control characters pass the schema's character limits, and take 1.2 MB each once JSON-escaped.
    const huge = '\u0001'.repeat(200_000)
    const items = [
      { rollout: rollout('small-1'), metadata: METADATA },
      { rollout: { ...rollout('huge'), output: huge, supplemental_context: huge }, metadata: METADATA },
      { rollout: rollout('small-2', { output: 'The answer is 4.' }), metadata: METADATA },
    ]
    for (let attempt = 0; attempt < 3; attempt++) {
      const batch = await call('POST', '/score/batch', { token: run.token, body: { items } })
      expect(batch.status, batch.text).toBe(200)
      const [first, tooLarge, third] = batch.json.results
      expect(first).toMatchObject({ rollout_id: 'small-1', step: 0, duplicate: attempt > 0 })
      expect(tooLarge.error).toMatchObject({ code: 'payload_too_large' })
      expect(tooLarge.error.message).toContain('1500000')
      expect(third).toMatchObject({ rollout_id: 'small-2', step: 0, duplicate: attempt > 0 })
    }
    const single = await call('POST', '/score', { token: run.token, body: items[1] })
    expect(single.status).toBe(413)
    expect(single.json.error).toMatchObject({ code: 'payload_too_large', details: { limit: 1_500_000 } })
    // Retries leaked no seat: the next two rollouts fill step 1, exactly.
    for (const id of ['next-1', 'next-2'])
      expect(
        (await call('POST', '/score', { token: run.token, body: { rollout: rollout(id), metadata: METADATA } })).json,
      ).toMatchObject({ step: 1, duplicate: false })
    const archived = await archivedSteps(run, 2, 2)
    expect(
      archived
        .get(0)!
        .map((line) => line.rollout_id)
        .sort(),
    ).toEqual(['small-1', 'small-2'])
  })
})

const UPDATE = JSON.stringify({
  strategy: 'ADVANCEMENT',
  consulted_memories: [],
  rationale: 'Ask for units.',
  modifications: [{ op: 'add', text: 'Names the unit.', weight: 1, reason: 'next step' }],
  final_adaptive: [
    { id: 'd-steps', text: 'Shows the key steps of the calculation.', weight: 1 },
    { text: 'Names the unit.', weight: 1 },
  ],
})

/** The ledger row of a single-shard global run's rollout, from the shard's own storage. */
const ledgerRow = (runId: string, step: number, rolloutId: string) =>
  runInDurableObject(env.LEDGER.getByName(ledgerName(runId, 'global', 0)), (_object, state) =>
    state.storage.sql
      .exec<{ rubric_version: number; score: number }>(
        'SELECT rubric_version, score FROM ledger WHERE step = ? AND rollout_id = ?',
        step,
        rolloutId,
      )
      .toArray()
      .at(0),
  )

describe('in sync mode', () => {
  let release: (() => void) | undefined
  afterEach(() => {
    release?.()
    clearFakeEndpoints()
  })

  it('a retry after its step updated keeps the first answer, whose wait ran out: not judged again', async () => {
    const held = new Promise<void>((resolve) => (release = resolve))
    fakeEndpoint('sync-retry', async () => {
      await held
      return UPDATE
    })
    const run = await createRun({
      ...RUBRICS,
      mode: 'sync',
      max_wait_s: 1,
      ledger_shards: 1,
      agents: { updater: fakeRole('sync-retry') },
    })
    const body = { rollout: rollout('sync-r1', { output: 'The answer is 4.' }), metadata: METADATA }
    const pending = call('POST', '/score', { token: run.token, body })
    await expectStatus(run.token, { rollouts: 1 })
    expect((await call('POST', '/complete', { token: run.token })).json).toMatchObject({ closed: true })
    const first = await pending
    expect(first.json).toMatchObject({ update_pending: true, rubric_version: 1, step: 0 })
    release!()
    const waited = await call('GET', '/rubric_status/wait?timeout_s=20', { token: run.token })
    expect(waited.json).toMatchObject({ status: 'updated', rubric_version: 2 })
    const retry = await call('POST', '/score', { token: run.token, body })
    expect(retry.json).toMatchObject({ duplicate: true, step: 0, rubric_version: 1, score: first.json.score })
    expect(await ledgerRow(run.runId, 0, 'sync-r1')).toEqual({ rubric_version: 1, score: first.json.score })
  })
})

describe('/rubric_status after a counted step updated', () => {
  it('shows that step and its update until the next holds a rollout; ?step=N reads any kept step', async () => {
    const run = await countedRun(4)
    for (let i = 0; i < 4; i++) {
      const scored = await call('POST', '/score', {
        token: run.token,
        body: { rollout: rollout(`st-${i}`, { output: `The answer is ${i + 3}.` }), metadata: METADATA },
      })
      expect(scored.json).toMatchObject({ step: 0 })
    }
    const waited = await call('GET', '/rubric_status/wait?timeout_s=20', { token: run.token })
    expect(waited.status).toBe(200)
    const status = await call('GET', '/rubric_status', { token: run.token })
    expect(status.json).toMatchObject({ step: 0, status: 'updated', rollouts: 4, closed_by: 'count' })
    expect(status.json.instances[0]).toMatchObject({ instance_id: 'global', rollouts: 4 })
    expect(status.json.instances[0].update).toBeDefined()
    const ofStep = await call('GET', '/rubric_status?step=0', { token: run.token })
    expect(ofStep.json).toEqual(status.json)
    expect((await call('GET', '/rubric_status?step=9', { token: run.token })).json.error).toMatchObject({
      code: 'not_found',
    })
    expect((await call('GET', '/rubric_status?step=x', { token: run.token })).status).toBe(400)
    await call('POST', '/score', { token: run.token, body: { rollout: rollout('st-next'), metadata: METADATA } })
    await expectStatus(run.token, { step: 1, status: 'collecting', rollouts: 1 })
    expect((await call('GET', '/rubric_status?step=0', { token: run.token })).json).toMatchObject({
      step: 0,
      status: 'updated',
    })
  })
})
