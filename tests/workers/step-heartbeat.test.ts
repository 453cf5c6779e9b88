/**
 * A step update slower than the coordinator's resend window (a real judge on a CPU takes minutes) is not sent again
 * and run twice: the running job tells the coordinator it is alive every `STEP_HEARTBEAT_S` (1 s in these tests), and
 * how far it has got, which `/rubric_status` shows until the update is done.
 */
import { runInDurableObject } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { coordinatorName } from '../../durable-objects/names.ts'
import { isDue } from '../../durable-objects/run-coordinator/step-jobs.ts'
import { PLAIN_ANALYSIS, unitUpdate } from '../support/rubrics.ts'
import { METADATA, call, clearFakeEndpoints, createRun, fakeEndpoint, fakeRole, rollout } from './helpers.ts'

const RUBRICS = {
  anchor_rubrics: [{ id: 'a-correct', text: 'The final answer is correct.', weight: 2 }],
  adaptive_rubrics: [{ id: 'd-steps', text: 'Shows the key steps.' }],
}
const UPDATE = unitUpdate(RUBRICS.adaptive_rubrics[0]!.text)

let release: (() => void) | undefined
afterEach(() => {
  release?.()
  clearFakeEndpoints()
})

/** When the coordinator last heard of step 0's job for the global instance (sent, or said alive), from its storage. */
function lastHeard(runId: string): Promise<number | null | undefined> {
  return runInDurableObject(
    env.RUN_COORDINATOR.getByName(coordinatorName(runId)),
    (_object, state) =>
      state.storage.sql
        .exec<{ heard: number | null }>(
          'SELECT max(enqueued_at, coalesce(alive_at, 0)) AS heard FROM step_instances ' +
            "WHERE step = 0 AND instance_id = 'global'",
        )
        .toArray()
        .at(0)?.heard,
  )
}

describe('a running step job', () => {
  it('says it is alive while its update is held, and runs once', async () => {
    const held = new Promise<void>((resolve) => (release = resolve))
    const updater = fakeEndpoint('heartbeat', async () => {
      await held
      return UPDATE
    })
    const run = await createRun({ ...RUBRICS, agents: { updater: fakeRole('heartbeat') } })
    for (const id of ['r1', 'r2']) {
      const scored = await call('POST', '/score', {
        token: run.token,
        body: { rollout: rollout(id), metadata: METADATA },
      })
      expect(scored.status, scored.text).toBe(200)
    }
    expect((await call('POST', '/complete', { token: run.token })).json).toMatchObject({ closed: true, step: 0 })
    await vi.waitFor(() => expect(updater.calls()).toBe(1), { timeout: 20_000, interval: 50 })
    const sent = await lastHeard(run.runId)
    expect(sent).toBeTypeOf('number')
    // Held for several heartbeats: each moves the time the resend counts from.
    await vi.waitFor(async () => expect(await lastHeard(run.runId)).toBeGreaterThan(sent!), {
      timeout: 10_000,
      interval: 100,
    })
    // A copy of the job sent meanwhile (a queue backlog, a resend) finds it at work and stays out; the running
    // message's own retry may go on.
    const coordinator = env.RUN_COORDINATOR.getByName(coordinatorName(run.runId))
    expect(await coordinator.claimStepJob(0, 'global', 'a-copy')).toBe(false)
    release!()
    await vi.waitFor(
      async () => {
        const status = await call('GET', '/rubric_status', { token: run.token })
        expect(status.json.rubric_version).toBe(2)
      },
      { timeout: 20_000, interval: 100 },
    )
    expect(updater.calls()).toBe(1)
    // Once the update is done, no copy runs at all.
    expect(await coordinator.claimStepJob(0, 'global', 'a-later-copy')).toBe(false)
  })

  it('shows in /rubric_status how far a slow update has got, as its heartbeat says', async () => {
    const held = new Promise<void>((resolve) => (release = resolve))
    // The first analysis answers at once, every other one waits for the test.
    fakeEndpoint('progress-analyzer', async (index) => {
      if (index > 0) await held
      return PLAIN_ANALYSIS
    })
    fakeEndpoint('progress-updater', async () => UPDATE)
    const run = await createRun({
      ...RUBRICS,
      agents: { analyzer: fakeRole('progress-analyzer'), updater: fakeRole('progress-updater') },
    })
    for (const [id, output] of [
      ['p1', 'The answer is 4.'],
      ['p2', 'It is 5.'],
      ['p3', 'Four.'],
    ]) {
      const scored = await call('POST', '/score', {
        token: run.token,
        body: { rollout: rollout(id!, { output: output! }), metadata: METADATA },
      })
      expect(scored.status, scored.text).toBe(200)
    }
    expect((await call('POST', '/complete', { token: run.token })).json).toMatchObject({ closed: true, step: 0 })
    const progressOf = async () => (await call('GET', '/rubric_status', { token: run.token })).json
    await vi.waitFor(
      async () => {
        const status = await progressOf()
        expect(status.status).toBe('updating')
        expect(status.instances[0].progress).toMatchObject({ phase: 'analysing', analyses: { done: 1, failed: 0 } })
      },
      { timeout: 20_000, interval: 200 },
    )
    const { progress } = (await progressOf()).instances[0]
    expect(progress.analyses.selected).toBeGreaterThan(1)
    expect(Date.parse(progress.at)).toBeGreaterThan(0)
    release!()
    await vi.waitFor(async () => expect((await progressOf()).rubric_version).toBe(2), {
      timeout: 20_000,
      interval: 100,
    })
    const done = (await progressOf()).instances[0]
    expect(done.progress).toBeUndefined()
    expect(done.update).toMatchObject({ analysed: progress.analyses.selected, failed: 0 })
  })
})

describe('a step job not heard from', () => {
  const row = { enqueued_at: 0, sends: 1, alive_at: null as number | null }
  it('waiting in a queue backlog is sent again after 180 s, then each time twice as long, at most an hour', () => {
    expect(isDue({ ...row, enqueued_at: null as unknown as number, sends: 0 }, 0)).toBe(true)
    expect(isDue(row, 179_999)).toBe(false)
    expect(isDue(row, 180_000)).toBe(true)
    expect(isDue({ ...row, sends: 2 }, 359_999)).toBe(false)
    expect(isDue({ ...row, sends: 2 }, 360_000)).toBe(true)
    expect(isDue({ ...row, sends: 9 }, 3_599_999)).toBe(false)
    expect(isDue({ ...row, sends: 9 }, 3_600_000)).toBe(true)
  })

  it('once at work, is sent again only when it has been silent for 180 s', () => {
    const atWork = { ...row, sends: 4, alive_at: 1_000_000 }
    expect(isDue(atWork, 1_179_999)).toBe(false)
    expect(isDue(atWork, 1_180_000)).toBe(true)
  })
})
