/**
 * What a trainer receives is exactly consistent: every rollout of one step and instance is scored on one rubric
 * version (an update that commits while a step collects takes effect from the next step), a sync-mode rollout has one
 * score wherever it is read, and a step closes by idle gap on time with nobody watching, whichever shard its rollouts
 * land on. Each test sends only what the trainer it plays sends: no status reads unless the trainer makes them.
 */
import { runInDurableObject } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { coordinatorName, instanceName, ledgerName, ledgerShardOf } from '../../durable-objects/names.ts'
import { instanceIdForInput } from '../../src/hash/index.ts'
import { METADATA, call, clearFakeEndpoints, createRun, fakeEndpoint, fakeRole, rollout } from './helpers.ts'

const RUBRICS = {
  anchor_rubrics: [{ id: 'a-correct', text: 'The final answer is correct.', weight: 2 }],
  adaptive_rubrics: [{ id: 'd-steps', text: 'Shows the key steps of the calculation.' }],
}

/** An updater reply that adds one adaptive rubric: each update makes a new version. */
const updaterReply = (text: string) =>
  JSON.stringify({
    strategy: 'ADVANCEMENT',
    consulted_memories: [],
    rationale: 'Ask for more.',
    modifications: [{ op: 'add', text, weight: 1, reason: 'next step' }],
    final_adaptive: [
      { id: 'd-steps', text: 'Shows the key steps of the calculation.', weight: 1 },
      { text, weight: 1 },
    ],
  })

type Run = { runId: string; token: string }
type Scored = { step: number; rubric_version: number; instance_id: string; score: number; criteria: unknown[] }

/** Gates still shut when a test ends: opened after it, so no held job blocks the queue for the next test. */
const openGates: (() => void)[] = []

/** A promise the test resolves when it chooses. */
function gate() {
  let open!: () => void
  const opened = new Promise<void>((resolve) => (open = resolve))
  return { opened, open }
}

/**
 * An updater on a fake endpoint that holds every call until `gate.open()`, and answers with a new rubric each time.
 */
function heldUpdater(tag: string) {
  const held = gate()
  openGates.push(held.open)
  const endpoint = fakeEndpoint(tag, async (index) => {
    await held.opened
    return updaterReply(`Names unit number ${index}.`)
  })
  return { ...endpoint, release: held.open }
}

/** `count` rollout ids whose shards cover all `shards` of the ledger (round robin over them). */
function idsOverShards(prefix: string, count: number, shards: number): string[] {
  const byShard = Array.from({ length: shards }, () => [] as string[])
  for (let i = 0; byShard.some((ids) => ids.length < Math.ceil(count / shards)); i++) {
    const id = `${prefix}-${i}`
    byShard[ledgerShardOf(id, shards)]!.push(id)
  }
  return Array.from({ length: count }, (_, i) => byShard[i % shards]![Math.floor(i / shards)]!)
}

async function scoreAll(run: Run, ids: readonly string[], input = 'What is 2+2?'): Promise<Scored[]> {
  return Promise.all(
    ids.map(async (id) => {
      const answer = await call('POST', '/score', {
        token: run.token,
        body: { rollout: rollout(id, { input, output: `The answer is 4 (${id}).` }), metadata: METADATA },
      })
      expect(answer.status, answer.text).toBe(200)
      return answer.json as Scored
    }),
  )
}

/** Evicts a Durable Object as production does to an idle one: its memory goes, its storage and alarm stay. */
async function evict(stub: DurableObjectStub): Promise<void> {
  await runInDurableObject(stub, (_o, state) => state.abort('evicted by the test')).catch((error: Error) => {
    if (!/evicted by the test/.test(String(error))) throw error
  })
}

/** A step's row in the coordinator's own storage: read without going through the Worker (no close on read). */
function stepRow(run: Run, step: number) {
  return runInDurableObject(
    env.RUN_COORDINATOR.getByName(coordinatorName(run.runId)),
    (_object, state) =>
      state.storage.sql
        .exec<{ status: string; closed_by: string | null }>('SELECT status, closed_by FROM steps WHERE step = ?', step)
        .toArray()[0],
  )
}

/** Waits until the shards have reported `rollouts` rollouts of step 0 to the coordinator (read from its storage). */
async function waitReported(run: Run, rollouts: number): Promise<void> {
  const coordinator = env.RUN_COORDINATOR.getByName(coordinatorName(run.runId))
  const reported = () =>
    runInDurableObject(coordinator, (_o, state) =>
      state.storage.sql
        .exec<{ n: number }>(
          "SELECT coalesce(sum(json_extract(tally, '$.rollouts')), 0) AS n FROM step_shards WHERE step = 0",
        )
        .one(),
    )
  await vi.waitFor(async () => expect(await reported()).toEqual({ n: rollouts }), { timeout: 5_000, interval: 50 })
}

async function versionsOf(run: Run, instanceId: string): Promise<number[]> {
  return runInDurableObject(env.RUBRIC_INSTANCE.getByName(instanceName(run.runId, instanceId)), (_object, state) =>
    state.storage.sql
      .exec<{ version: number }>('SELECT version FROM rubric_versions ORDER BY version')
      .toArray()
      .map((row) => row.version),
  )
}

const pairs = (answers: readonly Scored[]) => [...new Set(answers.map((a) => `${a.step}:v${a.rubric_version}`))]

afterEach(() => {
  for (const open of openGates.splice(0)) open()
  vi.restoreAllMocks()
  clearFakeEndpoints()
})

describe('one rubric version per step and instance', () => {
  it.each([
    { mode: 'global' as const, shards: 8, inputs: ['What is 2+2?'] },
    { mode: 'per_instance' as const, shards: 4, inputs: ['What is 2+2?', 'What is 3+3?'] },
  ])(
    '$mode: an update committing while the next step collects takes effect from the step after',
    async ({ mode, shards, inputs }) => {
      const updater = heldUpdater(`pin-${mode}`)
      const run = await createRun({
        ...RUBRICS,
        rubrics_mode: mode,
        ...(mode === 'per_instance' ? { ledger_shards: shards } : {}),
        agents: { updater: fakeRole(`pin-${mode}`) },
      })
      const resolvedInstances = await Promise.all(
        inputs.map((input) => (mode === 'global' ? 'global' : instanceIdForInput(input))),
      )
      const each = (prefix: string) =>
        Promise.all(inputs.map((input, i) => scoreAll(run, idsOverShards(`${prefix}-${i}`, 2 * shards, shards), input)))

      const step0 = (await each('s0')).flat()
      expect(pairs(step0)).toEqual(['0:v1'])
      expect((await call('POST', '/complete', { token: run.token })).json).toMatchObject({ closed: true, step: 0 })
      // Step 0's update is planned and held; step 1 opens on every shard.
      await vi.waitFor(() => expect(updater.calls()).toBeGreaterThan(0), { timeout: 20_000, interval: 50 })
      const early = (await each('s1a')).flat()
      updater.release()
      await vi.waitFor(
        async () => {
          expect((await stepRow(run, 0))?.status).toBe('updated')
          for (const instanceId of resolvedInstances) expect(await versionsOf(run, instanceId)).toEqual([1, 2])
        },
        { timeout: 20_000, interval: 50 },
      )
      // The rest of step 1 arrives after version 2 committed: still scored on version 1, the version of its step.
      // In two waves: the first wave's replies are what would teach the isolate the new version.
      const late = [...(await each('s1b')).flat(), ...(await each('s1c')).flat()]
      expect(pairs([...early, ...late])).toEqual(['1:v1'])
      expect((await call('POST', '/complete', { token: run.token })).json).toMatchObject({ closed: true, step: 1 })
      const step2 = (await each('s2')).flat()
      expect(new Set(step2.map((a) => a.step))).toEqual(new Set([2]))
      for (const instanceId of resolvedInstances) {
        const versions = new Set(step2.filter((a) => a.instance_id === instanceId).map((a) => a.rubric_version))
        expect(versions.size).toBe(1)
        expect([...versions][0]).toBeGreaterThanOrEqual(2)
      }
    },
  )

  it('through /compat/openrlhf, whose every body says current_step 0, steps closing by idle gap', async () => {
    const updater = heldUpdater('pin-openrlhf')
    const run = await createRun({ ...RUBRICS, close_after_idle_s: 1, agents: { updater: fakeRole('pin-openrlhf') } })
    const burst = async (tag: string) => {
      const query = Array.from({ length: 16 }, (_, i) => `Q: What is 2+2? A: The answer is 4 (${tag} ${i}).`)
      const answer = await call('POST', `/t/${run.token}/compat/openrlhf`, {
        body: { query, prompts: query.map(() => 'Q: What is 2+2? A:'), labels: query.map(() => '4') },
      })
      expect(answer.status, answer.text).toBe(200)
      return answer.json.extra_logs.rubric_version as number[]
    }
    expect(new Set(await burst('first'))).toEqual(new Set([1]))
    // The idle gap closes step 0 by itself; its update is held.
    await vi.waitFor(() => expect(updater.calls()).toBe(1), { timeout: 20_000, interval: 50 })
    const early = await burst('second-a')
    updater.release()
    await vi.waitFor(async () => expect(await versionsOf(run, 'global')).toEqual([1, 2]), {
      timeout: 20_000,
      interval: 50,
    })
    const late = [...(await burst('second-b')), ...(await burst('second-c'))]
    expect(new Set([...early, ...late])).toEqual(new Set([1]))
  })
})

describe('sync mode: one score per rollout', () => {
  it('the answer, a retry after release, the ledger row and the archive carry the re-judged score', async () => {
    const updater = fakeEndpoint('sync-up', async () => updaterReply('Names the units.'))
    const run = await createRun({
      ...RUBRICS,
      mode: 'sync',
      archive: true,
      max_wait_s: 30,
      agents: { updater: fakeRole('sync-up') },
    })
    const body = { rollout: rollout('sync-1', { output: 'The answer is 4 metres.' }), metadata: METADATA }
    const first = call('POST', '/score', { token: run.token, body })
    // A sync trainer closes its step itself once its rollouts are in.
    await vi.waitFor(
      async () => expect((await call('POST', '/complete', { token: run.token })).json).toMatchObject({ closed: true }),
      { timeout: 10_000, interval: 50 },
    )
    const answer = await first
    expect(answer.status, answer.text).toBe(200)
    expect(updater.calls()).toBe(1)
    expect(answer.json).toMatchObject({ step: 0, rubric_version: 2 })
    expect(answer.json.criteria).toHaveLength(3)
    const retried = await call('POST', '/score', { token: run.token, body })
    expect(retried.status, retried.text).toBe(200)
    const { request_id: _a, duplicate: _b, ...final } = answer.json
    expect(retried.json).toMatchObject({ ...final, duplicate: true })
    const shard = ledgerShardOf('sync-1', 8)
    const row = await runInDurableObject(env.LEDGER.getByName(ledgerName(run.runId, 'global', shard)), (_o, state) =>
      state.storage.sql
        .exec<{ score: number; rubric_version: number }>(
          "SELECT score, rubric_version FROM ledger WHERE rollout_id = 'sync-1'",
        )
        .one(),
    )
    expect(row).toEqual({ score: final.score, rubric_version: 2 })
    const line = await vi.waitFor(
      async () => {
        const listed = await env.ARCHIVE!.list({ prefix: `runs/${run.runId}/steps/` })
        expect(listed.objects).toHaveLength(1)
        return JSON.parse((await (await env.ARCHIVE!.get(listed.objects[0]!.key))!.text()).trim())
      },
      { timeout: 10_000, interval: 100 },
    )
    expect(line).toMatchObject({ rollout_id: 'sync-1', score: final.score, rubric_version: 2 })
  })
})

describe('idle closes with nobody watching', () => {
  it.each([
    { name: 'both rollouts on one shard', same: true },
    { name: 'on different shards', same: false },
  ])('$name: a rollout after a lost idle alarm opens the next step, not the overdue one', async ({ same }) => {
    const run = await createRun({ ...RUBRICS, close_after_idle_s: 1 })
    const firstId = 'lost-first'
    const shard = ledgerShardOf(firstId, 8)
    const secondId = Array.from({ length: 64 }, (_, i) => `lost-second-${i}`).find(
      (id) => (ledgerShardOf(id, 8) === shard) === same,
    )!
    expect((await scoreAll(run, [firstId]))[0]).toMatchObject({ step: 0 })
    const coordinator = () => env.RUN_COORDINATOR.getByName(coordinatorName(run.runId))
    await waitReported(run, 1)
    // The shard's report armed the idle alarm; then the alarm is lost.
    await runInDurableObject(coordinator(), (_o, state) => state.storage.deleteAlarm())
    // The idle gap itself is the behaviour under test: wait past it.
    await new Promise((resolve) => setTimeout(resolve, 1_500))
    expect((await scoreAll(run, [secondId]))[0]).toMatchObject({ step: 1 })
    expect(await stepRow(run, 0)).toMatchObject({ closed_by: 'idle' })
  })

  it.each([
    { name: 'on one shard', same: true, evicted: false },
    { name: 'on different shards', same: false, evicted: false },
    { name: 'its coordinator evicted between them', same: false, evicted: true },
  ])(
    '$name: a rollout sent at once after the last is judged slower than the gap, and still joins its step',
    async ({ same, evicted }) => {
      // The judge takes 1.5 s a rollout, the gap is 1 s: a trainer sending one rollout after another leaves no 1 s
      // pause, yet each record comes 1.5 s after the one before.
      const judgeMs = 1_500
      fakeEndpoint('slow-idle-judge', async () => {
        await new Promise((resolve) => setTimeout(resolve, judgeMs))
        return JSON.stringify({ grades: { 'a-correct': 8, 'd-steps': 6 } })
      })
      const run = await createRun({
        ...RUBRICS,
        close_after_idle_s: 1,
        agents: { scorer: fakeRole('slow-idle-judge') },
      })
      const firstId = `slow-first-${same}-${evicted}`
      const shard = ledgerShardOf(firstId, 8)
      const others = Array.from({ length: 64 }, (_, i) => `slow-next-${same}-${evicted}-${i}`).filter(
        (id) => (ledgerShardOf(id, 8) === shard) === same,
      )
      expect((await scoreAll(run, [firstId]))[0]).toMatchObject({ step: 0 })
      if (evicted) {
        // What the coordinator heard of the first judgement is in its storage, not only in its memory.
        await waitReported(run, 1)
        await evict(env.RUN_COORDINATOR.getByName(coordinatorName(run.runId)))
      }
      expect((await scoreAll(run, [others[0]!]))[0]).toMatchObject({ step: 0 })
      expect((await scoreAll(run, [others[1]!]))[0]).toMatchObject({ step: 0 })
      // A person watching is told the gap waits for the judge too.
      const watched = await call('GET', '/rubric_status', { token: run.token })
      expect(watched.json.closes_when).toMatch(
        /after 1 s without a new rollout \(.*; [12] s more for the slowest judgement\)/,
      )
      // With nothing more sent the step closes by the gap, holding all three.
      await vi.waitFor(async () => expect(await stepRow(run, 0)).toMatchObject({ closed_by: 'idle' }), {
        timeout: 15_000,
        interval: 200,
      })
      const status = await call('GET', '/rubric_status', { token: run.token })
      expect(status.json).toMatchObject({ step: 0, closed_by: 'idle', rollouts: 3 })
    },
  )

  it('a slow judgement still counts after its shard wakes and records a quick one, coordinator evicted', async () => {
    // A GRPO group's repeated answer is a cache hit, judged at once; the other answers take 1.5 s.
    fakeEndpoint('slow-unless-quick', async (_index, request) => {
      if (!(await request.text()).includes('quick')) await new Promise((resolve) => setTimeout(resolve, 1_500))
      return JSON.stringify({ grades: { 'a-correct': 8, 'd-steps': 6 } })
    })
    const run = await createRun({
      ...RUBRICS,
      close_after_idle_s: 1,
      agents: { scorer: fakeRole('slow-unless-quick') },
    })
    const slowId = 'woken-slow'
    const shard = ledgerShardOf(slowId, 8)
    const ids = Array.from({ length: 64 }, (_, i) => `woken-${i}`)
    const quickId = ids.map((id) => `${id}-quick`).find((id) => ledgerShardOf(id, 8) === shard)!
    const lastId = ids.find((id) => ledgerShardOf(id, 8) !== shard)!
    const instanceId = (await scoreAll(run, [slowId]))[0]!.instance_id
    await waitReported(run, 1)
    // The shard forgets what it held in memory, then records a quick judgement and reports the step again.
    await evict(env.LEDGER.getByName(ledgerName(run.runId, instanceId, shard)))
    expect((await scoreAll(run, [quickId]))[0]).toMatchObject({ step: 0 })
    await waitReported(run, 2)
    await evict(env.RUN_COORDINATOR.getByName(coordinatorName(run.runId)))
    // The next slow rollout comes 1.5 s after the last record, more than the gap: the first one's judgement covers it.
    expect((await scoreAll(run, [lastId]))[0]).toMatchObject({ step: 0 })
  })

  it('a step unread for twice the idle gap, its coordinator evicted again and again, closes by alarm', async () => {
    const run = await createRun({ ...RUBRICS, close_after_idle_s: 1 })
    await scoreAll(run, idsOverShards('evicted', 8, 8))
    const coordinator = () => env.RUN_COORDINATOR.getByName(coordinatorName(run.runId))
    await waitReported(run, 8)
    // Evicted over and over, as an idle object is in production.
    await vi.waitFor(
      async () => {
        await evict(coordinator())
        expect((await stepRow(run, 0))?.status).not.toBe('collecting')
      },
      { timeout: 10_000, interval: 300 },
    )
    const status = await call('GET', '/rubric_status', { token: run.token })
    expect(status.json).toMatchObject({ step: 0, closed_by: 'idle', rollouts: 8 })
  })
})
