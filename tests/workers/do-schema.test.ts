/**
 * Durable Object storage written by an earlier release (a table before columns were added to it) must keep working
 * after a deploy: its rows are read, new rows are written, and a step commits on top of them.
 */
import { env } from 'cloudflare:workers'
import { runInDurableObject } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import { ShardSteps, upgradeStepState } from '../../durable-objects/ledger-shard/steps.ts'
import { MetaStore } from '../../durable-objects/meta-store.ts'
import { instanceName, ledgerName } from '../../durable-objects/names.ts'
import { METADATA, call, createRun, rollout } from './helpers.ts'

const RUBRICS = {
  anchor_rubrics: [{ id: 'a-correct', text: 'The final answer is correct.' }],
  adaptive_rubrics: [{ id: 'd-steps', text: 'Shows the key steps of the calculation.' }],
}

/** The RubricInstance's versions as the first release created them (git history of durable-objects/rubric-instance). */
const FIRST_RUBRIC_VERSIONS =
  'CREATE TABLE rubric_versions (version INTEGER PRIMARY KEY, rubrics TEXT NOT NULL, created_at TEXT NOT NULL, ' +
  'step INTEGER, note TEXT NOT NULL)'

/** Resets a Durable Object the way a deploy does: in-memory state dropped, storage kept, constructor run again. */
async function resetObject(stub: DurableObjectStub): Promise<void> {
  await runInDurableObject(stub, (_object, state) => state.abort('reset by the schema test')).catch((error: Error) => {
    if (!/reset by the schema test/.test(String(error))) throw error
  })
}

const columnsOf = (sql: SqlStorage, table: string) =>
  sql
    .exec<{ name: string }>('SELECT name FROM pragma_table_info(?)', table)
    .toArray()
    .map((row) => row.name)

describe('Durable Object storage from an earlier release', () => {
  it('keeps old rubric versions, gains the new columns, scores on the newest, commits the next on top', async () => {
    const run = await createRun(RUBRICS)
    // A stub is broken by the reset it sees, so each use gets its own.
    const instance = () => env.RUBRIC_INSTANCE.getByName(instanceName(run.runId, 'global'))
    const rubric = (id: string, text: string, isAnchor: boolean, version: number) => ({
      id,
      text,
      weight: 1,
      is_anchor: isAnchor,
      version,
      created_at: '2026-01-01T00:00:00.000Z',
      metadata: {},
    })
    const v1 = [
      rubric('a-correct', 'The final answer is correct.', true, 1),
      rubric('d-steps', 'Shows the key steps of the calculation.', false, 1),
    ]
    const v2 = [...v1, rubric('d-units', 'Names the units.', false, 2)]
    await runInDurableObject(instance(), (_object, state) => {
      state.storage.sql.exec('DROP TABLE rubric_versions')
      // The first release kept no record of the schema it created.
      state.storage.sql.exec('DROP TABLE applied_schemas')
      state.storage.sql.exec(FIRST_RUBRIC_VERSIONS)
      state.storage.sql.exec(
        "INSERT INTO rubric_versions VALUES (1, ?, '2026-01-01T00:00:00.000Z', NULL, " +
          "'initial rubrics from the run config')",
        JSON.stringify(v1),
      )
      state.storage.sql.exec(
        `INSERT INTO rubric_versions VALUES (2, ?, '2026-01-02T00:00:00.000Z', 0, 'ADVANCEMENT update at step 0')`,
        JSON.stringify(v2),
      )
    })
    await resetObject(instance())

    const scored = await call('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('after-deploy'), metadata: METADATA },
    })
    expect(scored.status, scored.text).toBe(200)
    expect(scored.json).toMatchObject({ duplicate: false, step: 0, rubric_version: 2 })
    expect(scored.json.criteria.map((c: { rubric_id: string }) => c.rubric_id)).toEqual([
      'a-correct',
      'd-steps',
      'd-units',
    ])

    const history = await call('GET', '/rubrics/history', { token: run.token })
    expect(history.status, history.text).toBe(200)
    expect(
      history.json.versions.map((v: { version: number; refused: string[]; strategy: string | null }) => [
        v.version,
        v.refused,
        v.strategy,
      ]),
    ).toEqual([
      [1, [], null],
      [2, [], null],
    ])

    expect((await call('POST', '/complete', { token: run.token })).json).toMatchObject({
      status: 'complete',
      closed: true,
    })
    const waited = await call('GET', '/rubric_status/wait?timeout_s=60', { token: run.token })
    expect(waited.status, waited.text).toBe(200)
    expect(waited.json).toMatchObject({ status: 'updated', step: 0, rollouts: 1, pending: 0 })
    await runInDurableObject(instance(), (_object, state) => {
      expect(columnsOf(state.storage.sql, 'rubric_versions')).toEqual(
        expect.arrayContaining(['strategy', 'rationale', 'diff', 'refused']),
      )
      expect(
        state.storage.sql.exec<{ n: number }>('SELECT count(*) AS n FROM step_updates WHERE step = 0').one().n,
      ).toBe(1)
      // Brought up to date once: the next wake compares one stored definition instead of listing every table.
      const applied = state.storage.sql.exec<{ tables: string }>('SELECT tables FROM applied_schemas').toArray()
      expect(applied.map((row) => row.tables)).toEqual(['criterion_health,rubric_versions,step_updates'])
    })
  })

  it("the oldest format's trainer step (its own meta row) is kept only for the step it names", async () => {
    const run = await createRun({ ...RUBRICS, ledger_shards: 1 })
    const shard = env.LEDGER.getByName(ledgerName(run.runId, 'global', 0))
    await runInDurableObject(shard, (_object, state) => {
      const sql = state.storage.sql
      const upgraded = (trainerStep: string) => {
        sql.exec('DELETE FROM shard_steps')
        sql.exec(
          "INSERT OR REPLACE INTO meta (key, value) VALUES ('pinned', '3:2'), ('trainer_step', ?), " +
            `('updates', '{"2":[2,1000]}'), ('updated_through', '2')`,
          trainerStep,
        )
        const meta = new MetaStore(sql)
        upgradeStepState(sql, meta)
        const steps = new ShardSteps(sql, new MetaStore(sql))
        const left = ['pinned', 'trainer_step', 'updates', 'updated_through'].filter(
          (key) => meta.get(key) !== undefined,
        )
        return { version: steps.pinned(3), trainerStep: steps.trainerStep(3), update: steps.update(2), left }
      }
      expect(upgraded('3:17')).toEqual({ version: 2, trainerStep: 17, update: { version: 2, at: 1000 }, left: [] })
      expect(upgraded('4:9')).toMatchObject({ version: 2, trainerStep: -1 })
    })
  })

  it("a ledger shard's per-step state in meta keys is moved to shard_steps once, and the step goes on", async () => {
    const run = await createRun({ ...RUBRICS, ledger_shards: 1, ledger_retention_steps: 5 })
    const shard = () => env.LEDGER.getByName(ledgerName(run.runId, 'global', 0))
    const first = await call('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('old-1'), metadata: METADATA },
    })
    expect(first.json).toMatchObject({ step: 0, duplicate: false })
    // The format before shard_steps: the step's pin and trainer step in one meta row, updates in a JSON map.
    await runInDurableObject(shard(), (_object, state) => {
      const sql = state.storage.sql
      sql.exec('DROP TABLE shard_steps')
      sql.exec('DELETE FROM applied_schemas')
      sql.exec("INSERT OR REPLACE INTO meta (key, value) VALUES ('pinned', '0:1:0'), ('updates', '{}')")
    })
    await resetObject(shard())
    const retried = await call('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('old-1'), metadata: METADATA },
    })
    expect(retried.json).toMatchObject({ step: 0, rubric_version: 1, duplicate: true })
    const second = await call('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('old-2'), metadata: METADATA },
    })
    expect(second.json).toMatchObject({ step: 0, rubric_version: 1, duplicate: false })
    await runInDurableObject(shard(), (_object, state) => {
      const sql = state.storage.sql
      expect(sql.exec('SELECT step, version, trainer_step FROM shard_steps').toArray()).toEqual([
        { step: 0, version: 1, trainer_step: 0 },
      ])
      expect(
        sql
          .exec("SELECT key FROM meta WHERE key IN ('pinned', 'trainer_step', 'updates', 'updated_through')")
          .toArray(),
      ).toEqual([])
    })
  })
})
