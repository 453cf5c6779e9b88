/**
 * The sharded step ledger on real workerd: its statements go by the primary key, a step closes at exactly
 * `rollouts_per_step` rollouts however the shards' reports interleave, old steps leave the ledger (archived first when
 * the run asks), batches make one ledger call per shard, and an overloaded object is a 503 the client retries.
 */
import { createExecutionContext, runInDurableObject } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { LEDGER_SQL, type StepRolloutRow } from '../../durable-objects/ledger-shard/tables.ts'
import { COORDINATOR_SQL } from '../../durable-objects/run-coordinator/statements.ts'
import { DETAILED_STEPS } from '../../durable-objects/run-coordinator/tables.ts'
import { coordinatorName, instanceName, ledgerName, ledgerShardOf } from '../../durable-objects/names.ts'
import { type AnalysisCandidate, selectForAnalysis } from '../../src/analysis/select.ts'
import { RewardClient } from '../../src/client/index.ts'
import { emptyTally } from '../../src/scoring/tally.ts'
import { createApp } from '../../workers/app.ts'
import type { Env } from '../../workers/env.ts'
import { METADATA, call, createRun, expectStatus, ledgerRows, rollout } from './helpers.ts'

const RUBRICS = {
  anchor_rubrics: [{ id: 'a-correct', text: 'The final answer is correct.', weight: 2 }],
  adaptive_rubrics: [{ id: 'd-steps', text: 'Shows the key steps of the calculation.' }],
}

type Run = { runId: string; token: string }

const score = (run: Run, id: string, output = `The answer is 4 (${id}).`) =>
  call('POST', '/score', { token: run.token, body: { rollout: rollout(id, { output }), metadata: METADATA } })

/** Rows per step over a global run's 8 shards, read from each shard's storage. */
async function rowsByStep(runId: string): Promise<Record<number, number>> {
  const counts: Record<number, number> = {}
  for (let shard = 0; shard < 8; shard++) {
    const rows = await runInDurableObject(
      env.LEDGER.getByName(ledgerName(runId, 'global', shard)),
      (_object, state) => {
        const exists = state.storage.sql.exec(`SELECT count(*) AS n FROM sqlite_master WHERE name = 'ledger'`).one().n
        return exists
          ? state.storage.sql
              .exec<{ step: number; n: number }>('SELECT step, count(*) AS n FROM ledger GROUP BY step')
              .toArray()
          : []
      },
    )
    for (const { step, n } of rows) counts[step] = (counts[step] ?? 0) + n
  }
  return counts
}

/** A step's rollouts as the selection sees them, read from each of a global run's 8 shards. */
async function stepCandidates(runId: string, step: number): Promise<AnalysisCandidate[]> {
  const candidates: AnalysisCandidate[] = []
  for (let shard = 0; shard < 8; shard++) {
    const rows = await runInDurableObject(env.LEDGER.getByName(ledgerName(runId, 'global', shard)), (_object, state) =>
      state.storage.sql.exec<StepRolloutRow>(LEDGER_SQL.stepRollouts, step).toArray(),
    )
    for (const row of rows)
      candidates.push({
        rollout_id: row.rollout_id,
        group: row.grp,
        score: row.score,
        output_chars: row.output_chars,
        output_hash: row.output_hash,
        grades: Object.fromEntries(
          (JSON.parse(row.criteria) as { rubric_id: string; grade: number }[]).map((c) => [c.rubric_id, c.grade]),
        ),
        tactics: row.tactics ? (JSON.parse(row.tactics) as string[]) : [],
      })
  }
  return candidates
}

afterEach(() => {
  vi.restoreAllMocks()
})

describe("the ledger's statements", () => {
  it('each go by a prefix of the primary key: none scans the table', async () => {
    const run = await createRun(RUBRICS)
    expect((await score(run, 'plan-1')).status).toBe(200)
    const plans = await runInDurableObject(
      env.LEDGER.getByName(ledgerName(run.runId, 'global', ledgerShardOf('plan-1', 8))),
      (_object, state) =>
        Object.entries(LEDGER_SQL).map(([name, sql]) => {
          const params = Array.from({ length: (sql.match(/\?/g) ?? []).length }, () => 0)
          return {
            name,
            details: state.storage.sql
              .exec<{ detail: string }>(`EXPLAIN QUERY PLAN ${sql}`, ...params)
              .toArray()
              .map((row) => row.detail),
          }
        }),
    )
    expect(plans.map((plan) => plan.name)).toEqual(Object.keys(LEDGER_SQL))
    for (const { name, details } of plans) {
      expect(
        details.filter((detail) => /\bSCAN (ledger|shard_steps)\b/.test(detail)),
        `${name}: ${details.join(' | ')}`,
      ).toEqual([])
      if (!/^INSERT\b/.test(LEDGER_SQL[name as keyof typeof LEDGER_SQL]))
        expect(
          details.some((detail) =>
            /SEARCH ledger USING PRIMARY KEY \(step[=<]|SEARCH shard_steps USING INTEGER PRIMARY KEY/.test(detail),
          ),
          `${name}: ${details.join(' | ')}`,
        ).toBe(true)
    }
  })
})

/**
 * `steps` holds the last DETAILED_STEPS (200) updated steps and the steps not yet updated:
 * `StepLifecycle.forgetOldDetail` deletes older updated rows as each step is updated ("the coordinator's steps").
 */
const EVERY_STEP = 'reads every row of steps (at most DETAILED_STEPS, 200, updated ones plus the live steps)'
/** Steps keep their shard, instance and LLM rows for DETAILED_STEPS (200) steps: `StepLifecycle.forgetOldDetail`. */
const DETAILED = 'DETAILED_STEPS (200) steps, trimmed by StepLifecycle.forgetOldDetail'

/**
 * The coordinator's statements that read a table in key order or whole instead of by a key, and why each may.
 * A scan of every step reads the live steps and at most 200 updated ones however long the run (not 10,000 at 10,000).
 */
const COORDINATOR_SCANS: Partial<Record<keyof typeof COORDINATOR_SQL, string>> = {
  latestSteps: 'walks the primary key down and stops at its LIMIT (DETAILED_STEPS, 200, for the timeline)',
  lastUpdated: 'walks the primary key down to the newest updated step: reads only the live steps above it',
  lastUpdatedStep: 'max() walks the primary key down to the newest updated step: reads only the live steps above it',
  oldestUnfinished: `walks the primary key up to the oldest step closed and not updated; when none is, ${EVERY_STEP}`,
  closingSteps: `${EVERY_STEP}; once per CloseNotices.tellShards`,
  liveSteps: `${EVERY_STEP}; once per runs-index read (activity)`,
  liveShards: `${EVERY_STEP} to find the live ones; once per instances read`,
  forgetShardsThrough: `${EVERY_STEP} to find the updated ones; once per updated step past the first 200`,
  pendingUpdates: `reads step_instances whole: the live steps' rows and the last ${DETAILED}`,
  allInstances: 'returns every row: one per rubric instance that has finished an update (1 in global mode)',
  llmTotals: `sums every row: roles × models × outcomes for each of the last ${DETAILED}, plus step -1's sums`,
}

describe("the coordinator's statements", () => {
  it('each go by a primary key, or scan with the reason listed beside them', async () => {
    const run = await createRun(RUBRICS)
    expect((await score(run, 'plan-c')).status).toBe(200)
    const plans = await runInDurableObject(env.RUN_COORDINATOR.getByName(coordinatorName(run.runId)), (_o, state) =>
      Object.entries(COORDINATOR_SQL).map(([name, sql]) => {
        const params = Array.from({ length: (sql.match(/\?/g) ?? []).length }, () => 0)
        const details = state.storage.sql
          .exec<{ detail: string }>(`EXPLAIN QUERY PLAN ${sql}`, ...params)
          .toArray()
          .map((row) => row.detail)
        return { name, details }
      }),
    )
    expect(plans.map((plan) => plan.name)).toEqual(Object.keys(COORDINATOR_SQL))
    for (const { name, details } of plans) {
      // A table read that goes by no key: `SCAN t`, or `SEARCH t` without `USING` (max() walking the key down).
      const scans = details.filter((detail) => /^(SCAN|SEARCH) \S+$|^SCAN /.test(detail))
      const listed = name in COORDINATOR_SCANS
      // A listed statement that no longer scans leaves the list, so the list says only what is true.
      expect(
        scans.length > 0,
        `${name} ${listed ? 'is listed but scans nothing' : 'scans'}: ${details.join(' | ')}`,
      ).toBe(listed)
    }
  })
})

describe('rollouts_per_step over 8 shards', () => {
  it('closes every step at exactly N distinct rollouts when 3.25 N arrive 32 at a time; each is updated', async () => {
    const run = await createRun({ ...RUBRICS, rollouts_per_step: 40, ledger_retention_steps: 5 })
    const ids = Array.from({ length: 130 }, (_, i) => `n-${i}`)
    let next = 0
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < ids.length) {
          const answer = await score(run, ids[next++]!)
          expect(answer.status, answer.text).toBe(200)
        }
      }),
    )
    const coordinator = env.RUN_COORDINATOR.getByName(coordinatorName(run.runId))
    await vi.waitFor(
      async () =>
        expect(
          (await coordinator.timeline()).map(({ step, status, rollouts }) => ({ step, status, rollouts })),
        ).toEqual([
          { step: 0, status: 'updated', rollouts: 40 },
          { step: 1, status: 'updated', rollouts: 40 },
          { step: 2, status: 'updated', rollouts: 40 },
          { step: 3, status: 'collecting', rollouts: 10 },
        ]),
      { timeout: 15_000, interval: 100 },
    )
    expect(await rowsByStep(run.runId)).toEqual({ 0: 40, 1: 40, 2: 40, 3: 10 })
    await expectStatus(run.token, {
      step: 3,
      status: 'collecting',
      rollouts: 10,
      closes_when: 'after 30 more distinct rollouts (rollouts_per_step 40)',
    })
  })
})

describe('a step of 4,096 rollouts', () => {
  it('scores every rollout, analyses at most the budget with the reasons chosen, completes the update', async () => {
    const run = await createRun({ ...RUBRICS, rollouts_per_step: 4_096 })
    // 256 prompts × 16 samples, sent as the trainer's batches of 1,024.
    const items = Array.from({ length: 4_096 }, (_, i) => {
      const prompt = i % 256
      const sample = Math.floor(i / 256)
      return {
        rollout: rollout(`big-${i}`, {
          input: `What is ${prompt} + ${prompt}?`,
          output: `${'Adding the two. '.repeat(1 + (sample % 3))}The answer is ${prompt * 2 + (sample % 4)}.`,
          supplemental_context: String(prompt * 2),
        }),
        metadata: METADATA,
      }
    })
    for (let start = 0; start < items.length; start += 1_024) {
      const answer = await call('POST', '/score/batch', {
        token: run.token,
        body: { items: items.slice(start, start + 1_024) },
      })
      expect(answer.status).toBe(200)
      expect(answer.json.results.filter((result: { score?: number }) => typeof result.score !== 'number')).toEqual([])
    }
    const waited = await call('GET', '/rubric_status/wait?timeout_s=120', { token: run.token })
    expect(waited.status).toBe(200)
    expect(waited.json).toMatchObject({ step: 0, status: 'updated', rollouts: 4_096 })
    const { analysed, failed, reasons } = waited.json.analyses
    // What the selection must choose from the step as the shards recorded it, with global mode's budget: 32 for
    // coverage and at most 32 more that looked suspicious.
    const expected = selectForAnalysis(await stepCandidates(run.runId, 0), { coverage: 32, suspicious: 32 })
    const expectedReasons: Record<string, number> = {}
    for (const { reasons: why } of expected)
      for (const reason of why) expectedReasons[reason] = (expectedReasons[reason] ?? 0) + 1
    expect(failed).toBe(0)
    expect(analysed).toBe(expected.length)
    expect(reasons).toEqual(expectedReasons)
    // The inputs carry no injected instructions, and 4,096 rollouts fill the coverage budget.
    expect(reasons.injection).toBeUndefined()
    expect(expected.length).toBeGreaterThanOrEqual(32)
    expect(waited.json.instances[0].update).toMatchObject({ rollouts: 4_096, analysed })
  }, 120_000)
})

describe('bounded storage', () => {
  it('deletes a step ledger_retention_steps updates later, first archiving each rollout to R2 once', async () => {
    const run = await createRun({ ...RUBRICS, ledger_retention_steps: 1, archive: true })
    for (let step = 0; step < 4; step++) {
      for (let i = 0; i < 3; i++)
        expect(
          (
            await call('POST', '/score', {
              token: run.token,
              body: {
                rollout: rollout(`r${step}-${i}`, { output: `The answer is ${i + 3}.` }),
                metadata: { ...METADATA, current_step: step },
              },
            })
          ).status,
        ).toBe(200)
      expect((await call('POST', '/complete', { token: run.token })).json).toMatchObject({ closed: true, step })
      expect((await call('GET', '/rubric_status/wait?timeout_s=30', { token: run.token })).json).toMatchObject({
        status: 'updated',
        step,
      })
    }
    // After step 3's update only step 3 is within one update of its own.
    await vi.waitFor(async () => expect(await rowsByStep(run.runId)).toEqual({ 3: 3 }), {
      timeout: 5_000,
      interval: 100,
    })
    const listed = await env.ARCHIVE!.list({ prefix: `runs/${run.runId}/steps/` })
    const lines = (
      await Promise.all(
        listed.objects.map(async (object) => (await (await env.ARCHIVE!.get(object.key))!.text()).trim().split('\n')),
      )
    )
      .flat()
      .map((line) => JSON.parse(line))
    expect(lines.map((line) => line.rollout_id).sort()).toEqual(
      Array.from({ length: 4 }, (_, step) => [0, 1, 2].map((i) => `r${step}-${i}`))
        .flat()
        .sort(),
    )
    expect(lines[0]).toMatchObject({
      run_id: run.runId,
      instance_id: 'global',
      input: 'What is 2+2?',
      reference: '4',
      rubric_version: expect.any(Number),
      judge_model: 'mock:mock-heuristic-1',
    })
    expect(lines[0].criteria.length).toBe(2)
    for (const object of listed.objects)
      expect(object.key).toMatch(new RegExp(`^runs/${run.runId}/steps/00000[0-3]/global\\.[0-7]\\.ndjson$`))
  })
})

describe("a shard's own state", () => {
  it('costs a row per step for its announce, one for the committed update, two when its rows go', async () => {
    const run = await createRun({ ...RUBRICS, ledger_shards: 1, ledger_retention_steps: 0 })
    const shard = env.LEDGER.getByName(ledgerName(run.runId, 'global', 0))
    const shardRows = (step: number) =>
      runInDurableObject(
        shard,
        (_object, state) =>
          state.storage.sql.exec<{ n: number }>('SELECT count(*) AS n FROM ledger WHERE step = ?', step).one().n,
      )
    const playStep = async (step: number) => {
      for (const i of [0, 1]) expect((await score(run, `own-${step}-${i}`)).status).toBe(200)
      expect((await call('POST', '/complete', { token: run.token })).json).toMatchObject({ closed: true, step })
      expect((await call('GET', '/rubric_status/wait?timeout_s=30', { token: run.token })).json).toMatchObject({
        status: 'updated',
        step,
      })
      // Retention 0: the step's rows go once its update has committed.
      await vi.waitFor(async () => expect(await shardRows(step)).toBe(0), { timeout: 5_000, interval: 50 })
    }
    await playStep(0)
    const versionBefore = (await call('GET', '/rubric_status', { token: run.token })).json.rubric_version as number
    let stateRowsWritten = 0
    await runInDurableObject(shard, (_object, state) => {
      const sql = state.storage.sql
      const exec = sql.exec.bind(sql)
      sql.exec = ((query: string, ...bindings: SqlStorageValue[]) => {
        const cursor = exec(query, ...bindings)
        if (/^(INSERT INTO (meta|shard_steps)|DELETE FROM shard_steps)\b/.test(query))
          stateRowsWritten += cursor.rowsWritten
        return cursor
      }) as typeof sql.exec
    })
    await playStep(1)
    const versionAfter = (await call('GET', '/rubric_status', { token: run.token })).json.rubric_version as number
    // Step 1, by hand: its announce pins the step's version and notes the trainer step (1 row of shard_steps), the
    // close moves the shard's step on (1 of meta), the committed update is noted on the step's row (1) with the
    // rubrics it left when they are new (0 or 1 of meta), and the deletion of the step's rows is noted (1 of meta)
    // and takes step 0's row of shard_steps with it (1).
    expect(stateRowsWritten).toBe(5 + (versionAfter > versionBefore ? 1 : 0))
    // A late notice of an update of a step already gone does not hide the newest update.
    await shard.stepUpdated(0, await env.RUBRIC_INSTANCE.getByName(instanceName(run.runId, 'global')).snapshot())
    expect(await shard.awaitUpdate(1, 1)).toMatchObject({ version: versionAfter })
  })
})

/** The coordinator's rows of `table` by step (`steps`, `step_shards`), read from its storage. */
async function coordinatorSteps(runId: string, table: 'steps' | 'step_shards'): Promise<number[]> {
  return runInDurableObject(env.RUN_COORDINATOR.getByName(coordinatorName(runId)), (_object, state) =>
    state.storage.sql
      .exec<{ step: number }>(`SELECT step FROM ${table} ORDER BY step`)
      .toArray()
      .map((row) => row.step),
  )
}

describe("the coordinator's steps", () => {
  it('keep the last DETAILED_STEPS updated and the live ones; a late report of a gone step writes none', async () => {
    // More step updates than budgets.updates_per_window lets a run start in an hour (60 by default).
    const run = await createRun({ ...RUBRICS, budgets: { updates_per_window: DETAILED_STEPS + 21 } })
    const coordinator = env.RUN_COORDINATOR.getByName(coordinatorName(run.runId))
    const steps = DETAILED_STEPS + 20
    // Steps a shard took part in without a rollout: each closes by /complete and is updated at once (none to update).
    for (let step = 0; step < steps; step++) {
      expect(
        (await coordinator.announce({ instanceId: 'global', shard: 0, shardStep: -1, newestVersion: 1 })).step,
      ).toBe(step)
      expect(await coordinator.complete()).toMatchObject({ closed: true, step })
    }
    // The last step has a scored rollout, updated as any step is.
    expect((await score(run, 'after-many')).status).toBe(200)
    expect((await call('POST', '/complete', { token: run.token })).json).toMatchObject({ closed: true, step: steps })
    expect((await call('GET', '/rubric_status/wait?timeout_s=30', { token: run.token })).json).toMatchObject({
      step: steps,
      status: 'updated',
      rollouts: 1,
    })
    // Kept: the DETAILED_STEPS updated steps up to the last one, and the collecting step its close opened.
    const kept = Array.from({ length: DETAILED_STEPS + 1 }, (_, i) => steps - DETAILED_STEPS + 1 + i)
    expect(await coordinatorSteps(run.runId, 'steps')).toEqual(kept)
    expect(Math.min(...(await coordinatorSteps(run.runId, 'step_shards')))).toBeGreaterThan(steps - DETAILED_STEPS)
    await expectStatus(run.token, { step: steps, status: 'updated', rollouts: 1, pending: 0 })
    const timeline = await coordinator.timeline()
    // The timeline's newest DETAILED_STEPS steps, less the collecting one that has no rollout yet.
    expect(timeline.map((entry) => entry.step)).toEqual(kept.slice(1, -1))
    expect(timeline.at(-1)).toMatchObject({ step: steps, status: 'updated', rollouts: 1 })
    expect(timeline.slice(0, -1).every((entry) => entry.status === 'updated' && entry.rollouts === 0)).toBe(true)
    expect(await coordinator.activity()).toEqual({ scores: 1, last_step: steps })

    // A shard that slept through the steps reports and announces one that is gone: told the collecting step and the
    // closes it missed, it does not bring the step back; the announce registers it in the collecting step.
    const late = await coordinator.report({
      instanceId: 'global',
      shard: 5,
      step: 3,
      tally: { ...emptyTally(), rollouts: 2 },
    })
    expect(late.step).toBe(steps + 1)
    expect(late.closes[0]).toEqual({ step: 3 })
    expect(late.closes.length).toBe(steps + 1 - 3)
    const announced = await coordinator.announce({ instanceId: 'global', shard: 6, shardStep: 3, newestVersion: 1 })
    expect(announced.step).toBe(steps + 1)
    expect(announced.closes[0]).toEqual({ step: 3 })
    expect(await coordinatorSteps(run.runId, 'steps')).toEqual(kept)
    expect(Math.min(...(await coordinatorSteps(run.runId, 'step_shards')))).toBeGreaterThan(steps - DETAILED_STEPS)
    // The announce brought no rollout: the newest updated step stays in view, the collecting one is read by number.
    await expectStatus(run.token, { step: steps, status: 'updated' })
    expect((await call('GET', `/rubric_status?step=${steps + 1}`, { token: run.token })).json).toMatchObject({
      step: steps + 1,
      status: 'collecting',
      rollouts: 0,
    })
  }, 60_000)
})

describe('steps without /complete', () => {
  it('a rollout of a later metadata.current_step closes the step (closed_by step_advance), opens next', async () => {
    const run = await createRun(RUBRICS)
    for (const id of ['adv-0', 'adv-1'])
      expect(
        (
          await call('POST', '/score', {
            token: run.token,
            body: { rollout: rollout(id), metadata: { ...METADATA, current_step: 4 } },
          })
        ).status,
      ).toBe(200)
    const status = await expectStatus(run.token, { step: 0, status: 'collecting', rollouts: 2 })
    expect(status.closes_when).toContain('metadata.current_step is past 4')
    // Same step again: nothing closes.
    expect(
      (
        await call('POST', '/score', {
          token: run.token,
          body: { rollout: rollout('adv-2'), metadata: { ...METADATA, current_step: 4 } },
        })
      ).status,
    ).toBe(200)
    const next = await call('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('adv-3'), metadata: { ...METADATA, current_step: 5 } },
    })
    expect(next.json.step).toBe(1)
    await expectStatus(run.token, { step: 1, status: 'collecting', rollouts: 1 })
    // Step 0 kept the three rollouts of trainer step 4, and its update ran.
    await vi.waitFor(
      async () => {
        const timeline = await runInDurableObject(
          env.RUN_COORDINATOR.getByName(coordinatorName(run.runId)),
          (instance) =>
            (
              instance as unknown as { timeline(): Promise<{ step: number; rollouts: number; status: string }[]> }
            ).timeline(),
        )
        expect(timeline.map((entry) => [entry.step, entry.rollouts, entry.status])).toEqual([
          [0, 3, 'updated'],
          [1, 1, 'collecting'],
        ])
      },
      { timeout: 10_000, interval: 100 },
    )
  })

  it('a step with no rollout for close_after_idle_s closes on its own (closed_by idle); its update runs', async () => {
    const run = await createRun({ ...RUBRICS, close_after_idle_s: 1 })
    for (const id of ['idle-0', 'idle-1'])
      expect(
        (await call('POST', '/score', { token: run.token, body: { rollout: rollout(id), metadata: METADATA } })).status,
      ).toBe(200)
    await vi.waitFor(
      async () =>
        expect((await call('GET', '/rubric_status', { token: run.token })).json).toMatchObject({
          step: 0,
          status: 'updated',
          closed_by: 'idle',
          rollouts: 2,
        }),
      { timeout: 15_000, interval: 100 },
    )
    // A run that closes by count never closes by idle gap or step advance.
    const counted = await createRun({ ...RUBRICS, rollouts_per_step: 10, close_after_idle_s: 1 })
    expect(
      (
        await call('POST', '/score', {
          token: counted.token,
          body: { rollout: rollout('count-0'), metadata: { ...METADATA, current_step: 1 } },
        })
      ).status,
    ).toBe(200)
    expect(
      (
        await call('POST', '/score', {
          token: counted.token,
          body: { rollout: rollout('count-1'), metadata: { ...METADATA, current_step: 2 } },
        })
      ).status,
    ).toBe(200)
    // The idle gap is the behaviour under test: half a second past close_after_idle_s, and still no close.
    await new Promise((resolve) => setTimeout(resolve, 1_500))
    await expectStatus(counted.token, { step: 0, status: 'collecting', rollouts: 2 })
  })

  it('a lost idle alarm holds nothing open: the next burst closes the overdue step before joining it', async () => {
    const run = await createRun({ ...RUBRICS, close_after_idle_s: 1 })
    const coordinator = env.RUN_COORDINATOR.getByName(coordinatorName(run.runId))
    expect(
      (await call('POST', '/score', { token: run.token, body: { rollout: rollout('lost-0'), metadata: METADATA } }))
        .status,
    ).toBe(200)
    // The shard's report of the rollout arrives and arms the idle alarm; then the alarm is lost.
    const reported = () =>
      runInDurableObject(
        coordinator,
        (_instance, state) =>
          state.storage.sql
            .exec<{ n: number }>(
              "SELECT coalesce(sum(json_extract(tally, '$.rollouts')), 0) AS n FROM step_shards WHERE step = 0",
            )
            .one().n,
      )
    await vi.waitFor(async () => expect(await reported()).toBe(1), { timeout: 5_000, interval: 20 })
    expect(await runInDurableObject(coordinator, (_instance, state) => state.storage.getAlarm())).not.toBeNull()
    const armedAt = Date.now()
    await runInDurableObject(coordinator, (_instance, state) => state.storage.deleteAlarm())
    await vi.waitFor(() => expect(Date.now() - armedAt).toBeGreaterThan(1_500), { timeout: 5_000, interval: 100 })
    const next = await call('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('lost-1', { output: 'The answer is 5.' }), metadata: METADATA },
    })
    expect(next.json.step).toBe(1)
    const timeline = await runInDurableObject(coordinator, (instance) =>
      (instance as unknown as { timeline(): Promise<{ step: number; rollouts: number; status: string }[]> }).timeline(),
    )
    expect(timeline.find((entry) => entry.step === 0)).toMatchObject({
      rollouts: 1,
      status: expect.stringMatching(/^(closing|updating|updated)$/),
    })
  })
})

describe('POST /score/batch', () => {
  it('answers an empty batch with empty results, a batch over 8,192 items with a 400 saying how to split', async () => {
    const run = await createRun(RUBRICS)
    const empty = await call('POST', '/score/batch', { token: run.token, body: { items: [] } })
    expect(empty.status, empty.text).toBe(200)
    expect(empty.json.results).toEqual([])
    const items = Array.from({ length: 8_193 }, (_, i) => ({ rollout: rollout(`cap-${i}`), metadata: METADATA }))
    const over = await call('POST', '/score/batch', { token: run.token, body: { items } })
    expect(over.status, over.text.slice(0, 300)).toBe(400)
    expect(over.json.error.message).toMatch(/at most 8192 items per request: send the rest in another/)
    expect(await ledgerRows(run.runId)).toBe(0)
  })

  it('answers items in order, a failed judgement failing only its item; a retry re-judges nothing', async () => {
    let judged = 0
    const realFetch = globalThis.fetch
    vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
      const url = input instanceof Request ? input.url : String(input)
      if (!url.startsWith('http://llm.test/batch/')) return realFetch(input, init)
      judged++
      const body = JSON.parse(String(init?.body ?? (input instanceof Request ? await input.text() : '{}')))
      if (JSON.stringify(body).includes('[refuse]'))
        return new Response('{"error":{"message":"bad request"}}', { status: 400 })
      const grades = [...RUBRICS.anchor_rubrics, ...RUBRICS.adaptive_rubrics].map((r) => ({
        rubric_id: r.id,
        grade: 6,
      }))
      const content = JSON.stringify({ grades })
      return new Response(
        JSON.stringify({
          id: 'c',
          object: 'chat.completion',
          created: 0,
          model: 'fake',
          choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content } }],
        }),
        { headers: { 'content-type': 'application/json' } },
      )
    })
    const run = await createRun({
      ...RUBRICS,
      agents: { scorer: { backend: 'openai', base_url: 'http://llm.test/batch/v1', model: 'fake', max_attempts: 1 } },
    })
    const items = ['b-0', 'b-1', 'b-2', 'b-3'].map((id) => ({
      rollout: rollout(id, { output: id === 'b-2' ? 'This one is [refuse]d.' : `The answer is 4 (${id}).` }),
      metadata: METADATA,
    }))
    const first = await call('POST', '/score/batch', { token: run.token, body: { items } })
    expect(first.status, first.text).toBe(200)
    expect(
      first.json.results.map(
        (result: { rollout_id?: string; error?: { code: string } }) => result.rollout_id ?? result.error!.code,
      ),
    ).toEqual(['b-0', 'b-1', 'llm_unavailable', 'b-3'])
    expect(first.json.results[0]).toMatchObject({ score: 0.6, duplicate: false, step: 0 })
    expect(judged).toBe(4)
    const retried = await call('POST', '/score/batch', { token: run.token, body: { items } })
    expect(retried.json.results.map((result: { duplicate?: boolean }) => result.duplicate ?? 'error')).toEqual([
      true,
      true,
      'error',
      true,
    ])
    // Only the refused item is judged again.
    expect(judged).toBe(5)
    expect(await ledgerRows(run.runId)).toBe(3)
  })
})

describe('an overloaded Durable Object', () => {
  it("is a 503 overloaded with Retry-After, not a 500, and the client's retry is scored once", async () => {
    const run = await createRun(RUBRICS)
    const app = createApp()
    let overloads = 1
    const ledger = new Proxy(env.LEDGER, {
      get(target, property, receiver) {
        if (property !== 'getByName') return Reflect.get(target, property, receiver)
        return (name: string) => {
          const stub = target.getByName(name)
          return new Proxy(stub, {
            get(object, method, stubReceiver) {
              if (method === 'record' && overloads > 0) {
                overloads--
                return async () => {
                  throw Object.assign(new Error('Durable Object is overloaded. Too many requests queued.'), {
                    overloaded: true,
                  })
                }
              }
              return Reflect.get(object, method, stubReceiver)
            },
          })
        }
      },
    })
    const patched = { ...env, LEDGER: ledger } as Env
    const seen: { status: number; retryAfter: string | null; code?: string }[] = []
    const client = new RewardClient({
      baseUrl: 'http://worker.test',
      token: run.token,
      maxAttempts: 3,
      fetch: async (input, init) => {
        const response = await app.fetch(new Request(input, init), patched, createExecutionContext())
        seen.push({
          status: response.status,
          retryAfter: response.headers.get('retry-after'),
          code: response.ok ? undefined : ((await response.clone().json()) as { error: { code: string } }).error.code,
        })
        return response
      },
    })
    const result = await client.scoreAsync(rollout('over-1'), METADATA)
    expect(seen.map(({ status, retryAfter, code }) => [status, retryAfter, code])).toEqual([
      [503, '1', 'overloaded'],
      [200, null, undefined],
    ])
    expect(result).toMatchObject({ rollout_id: 'over-1', duplicate: false })
    expect(await ledgerRows(run.runId)).toBe(1)
  })
})
