/**
 * Sync mode at the scale of a real batch, against a real `wrangler dev`: 1,000 `/score` requests on one instance held
 * open over real connections until the step's update commits, then all released with the rubrics it committed. The
 * release costs no call per waiter: each waits on its rollout's ledger shard, and the update's commit hands the
 * shards the new rubrics (counted per call in `npm run bench:step`).
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { callJson, callJsonRetrying, METADATA } from './support/http.ts'
import { startWranglerDev, type WranglerDev } from './support/wrangler-dev.ts'

const WAITERS = 1_000

let dev: WranglerDev

beforeAll(async () => {
  dev = await startWranglerDev()
})

afterAll(async () => {
  await dev?.stop()
})

describe('sync mode', () => {
  it(`answers ${WAITERS.toLocaleString('en')} waiters on one instance at commit, each on its rubrics`, async () => {
    const created = await callJson(`${dev.baseUrl}/runs`, {
      token: dev.adminToken,
      body: {
        config: {
          mode: 'sync',
          anchor_rubrics: [{ text: 'The final answer is correct.' }],
          adaptive_rubrics: [{ text: 'Shows the key steps.' }],
        },
      },
    })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    const token: string = created.body.token
    let settled = 0
    const pending = Array.from({ length: WAITERS }, (_, i) => {
      const rollout = {
        id: `wait-${i}`,
        input: `What is ${i} + 1?`,
        output: `It is ${i + 1}.`,
        supplemental_context: String(i + 1),
      }
      return callJsonRetrying(`${dev.baseUrl}/score`, {
        token,
        body: { rollout, metadata: METADATA },
        timeoutMs: 120_000,
      }).finally(() => void settled++)
    })
    await vi.waitFor(
      async () => expect((await callJson(`${dev.baseUrl}/rubric_status`, { token })).body.rollouts).toBe(WAITERS),
      { timeout: 60_000, interval: 200 },
    )
    expect(settled, 'a sync-mode answer came back before its step was updated').toBe(0)

    expect((await callJson(`${dev.baseUrl}/complete`, { token, method: 'POST' })).body).toMatchObject({
      closed: true,
      step: 0,
    })
    const answers = await Promise.all(pending)
    const rubrics = await callJsonRetrying(`${dev.baseUrl}/rubrics`, { token })
    const version: number = rubrics.body.rubric_version
    // The mock updater changes the adaptive set, so every waiter was judged again on version 2.
    expect(version).toBe(2)
    expect(answers.filter((answer) => answer.status !== 200).map((answer) => answer.body)).toEqual([])
    expect(
      answers
        .filter((answer) => answer.body.update_pending || answer.body.rubric_version !== version)
        .map((answer) => answer.body),
    ).toEqual([])
    const ids = [...rubrics.body.anchor_rubrics, ...rubrics.body.adaptive_rubrics].map(
      (rubric: { id: string }) => rubric.id,
    )
    for (const answer of answers)
      expect(answer.body.criteria.map((criterion: { rubric_id: string }) => criterion.rubric_id)).toEqual(ids)
    expect((await callJsonRetrying(`${dev.baseUrl}/rubric_status`, { token })).body).toMatchObject({
      step: 0,
      status: 'updated',
      rollouts: WAITERS,
    })
  }, 240_000)
})
