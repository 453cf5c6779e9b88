/**
 * A counted step (`rollouts_per_step`) holds exactly N distinct rollouts whatever the trainer sends: identical
 * answers in one group or batch, a rollout id repeated in a batch, twins in flight at once, and a rollout too large to
 * store among its neighbours. Read from the archive (what distillation and audits read), not from the answers alone.
 */
import { env } from 'cloudflare:workers'
import { describe, expect, it, vi } from 'vitest'
import { ArchivedRollout } from '../../src/schemas/archive.ts'
import { METADATA, call, createRun, rollout } from './helpers.ts'

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
    expect(archived.get(0)!.map((line) => line.rollout_id).sort()).toEqual(['w', 'x', 'y', 'z'])
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
    expect(archived.get(0)!.map((line) => line.rollout_id).sort()).toEqual(['a', 'b', 'c'])
  })

  it('refuses a rollout too large to store alone (413 naming the limit); its neighbours and the step are whole', async () => {
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
      expect((await call('POST', '/score', { token: run.token, body: { rollout: rollout(id), metadata: METADATA } })).json)
        .toMatchObject({ step: 1, duplicate: false })
    const archived = await archivedSteps(run, 2, 2)
    expect(archived.get(0)!.map((line) => line.rollout_id).sort()).toEqual(['small-1', 'small-2'])
  })
})
