/**
 * Durable Object storage written by an earlier release (the first tables, before columns were added to them)
 * must keep working after a deploy: its rows are read, new rows are written, and the step completes.
 */
import { env } from 'cloudflare:workers'
import { runInDurableObject } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import { coordinatorName, instanceName } from '../../durable-objects/names.ts'
import { METADATA, call, createRun, rollout } from './helpers.ts'

const RUBRICS = {
  anchor_rubrics: [{ id: 'a-correct', text: 'The final answer is correct.' }],
  adaptive_rubrics: [{ id: 'd-steps', text: 'Shows the key steps of the calculation.' }],
  analysis_deadline_s: 2,
}

/** The RubricInstance tables as the first release created them (git history of durable-objects/rubric-instance). */
const FIRST_INSTANCE_TABLES = `
  CREATE TABLE rubric_versions (version INTEGER PRIMARY KEY, rubrics TEXT NOT NULL, created_at TEXT NOT NULL, step INTEGER, note TEXT NOT NULL);
  CREATE TABLE ledger (step INTEGER NOT NULL, rollout_id TEXT NOT NULL, rubric_version INTEGER NOT NULL, score REAL NOT NULL,
    criteria TEXT NOT NULL, cached INTEGER NOT NULL, rollout TEXT NOT NULL, created_at TEXT NOT NULL, PRIMARY KEY (step, rollout_id));
  CREATE TABLE judgements (rubric_version INTEGER NOT NULL, judgement_key TEXT NOT NULL, score REAL NOT NULL, criteria TEXT NOT NULL,
    PRIMARY KEY (rubric_version, judgement_key));`

/** The RunCoordinator's step_instances before it kept each instance's update outcome. */
const FIRST_STEP_INSTANCES = `
  CREATE TABLE step_instances (step INTEGER NOT NULL, instance_id TEXT NOT NULL, rubric_version INTEGER NOT NULL,
    rollouts INTEGER NOT NULL DEFAULT 0, updated INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (step, instance_id));`

/** Resets a Durable Object the way a deploy does: in-memory state dropped, storage kept, constructor run again. */
async function resetObject(stub: DurableObjectStub): Promise<void> {
  await runInDurableObject(stub, (_object, state) => state.abort('reset by the schema test')).catch((error: Error) => {
    if (!/reset by the schema test/.test(String(error))) throw error
  })
}

const columnsOf = (sql: SqlStorage, table: string) => sql.exec<{ name: string }>('SELECT name FROM pragma_table_info(?)', table).toArray().map((row) => row.name)

describe('Durable Object storage from an earlier release', () => {
  it('keeps the old rows, gains the new columns, and serves /score, /rubrics and a full step on them', async () => {
    const run = await createRun(RUBRICS)
    // A stub is broken by the reset it sees, so each use gets its own.
    const instance = () => env.RUBRIC_INSTANCE.getByName(instanceName(run.runId, 'global'))
    const coordinator = () => env.RUN_COORDINATOR.getByName(coordinatorName(run.runId))
    const rubrics = [
      { id: 'a-correct', text: 'The final answer is correct.', weight: 1, is_anchor: true, version: 1, created_at: '2026-01-01T00:00:00.000Z', metadata: {} },
      { id: 'd-steps', text: 'Shows the key steps of the calculation.', weight: 1, is_anchor: false, version: 1, created_at: '2026-01-01T00:00:00.000Z', metadata: {} },
    ]
    const criteria = [{ rubric_id: 'a-correct', grade: 3, weight: 1 }, { rubric_id: 'd-steps', grade: 3, weight: 1 }]
    await runInDurableObject(instance(), (_object, state) => {
      state.storage.sql.exec('DROP TABLE rubric_versions; DROP TABLE ledger; DROP TABLE judgements; DROP TABLE step_updates;')
      state.storage.sql.exec(FIRST_INSTANCE_TABLES)
      state.storage.sql.exec(`INSERT INTO rubric_versions VALUES (1, ?, '2026-01-01T00:00:00.000Z', NULL, 'initial rubrics from the run config')`, JSON.stringify(rubrics))
      state.storage.sql.exec(
        `INSERT INTO ledger VALUES (0, 'legacy-1', 1, 0.3, ?, 0, ?, '2026-01-01T00:00:00.000Z')`,
        JSON.stringify(criteria), JSON.stringify(rollout('legacy-1')),
      )
    })
    await runInDurableObject(coordinator(), (_object, state) => {
      state.storage.sql.exec('DROP TABLE step_instances')
      state.storage.sql.exec(FIRST_STEP_INSTANCES)
      state.storage.sql.exec(`INSERT INTO steps (step, status, rollouts, opened_at) VALUES (0, 'collecting', 1, '2026-01-01T00:00:00.000Z')`)
      state.storage.sql.exec(`INSERT INTO members VALUES (0, 'global', 'legacy-1')`)
      state.storage.sql.exec(`INSERT INTO step_instances (step, instance_id, rubric_version, rollouts) VALUES (0, 'global', 1, 1)`)
    })
    await resetObject(instance())
    await resetObject(coordinator())

    const again = await call('POST', '/score', { token: run.token, body: { rollout: rollout('legacy-1', { output: 'another answer' }), metadata: METADATA } })
    expect(again.status, again.text).toBe(200)
    expect(again.json).toMatchObject({ duplicate: true, score: 0.3, step: 0, rubric_version: 1 })
    const fresh = await call('POST', '/score', { token: run.token, body: { rollout: rollout('new-1'), metadata: METADATA } })
    expect(fresh.status, fresh.text).toBe(200)
    expect(fresh.json).toMatchObject({ duplicate: false, step: 0 })
    expect((await call('GET', '/rubric_status', { token: run.token })).json).toMatchObject({ step: 0, status: 'collecting', rollouts: 2 })

    const history = await call('GET', '/rubrics/history', { token: run.token })
    expect(history.status, history.text).toBe(200)
    expect(history.json.versions[0]).toMatchObject({ version: 1, refused: [], strategy: null })

    // The legacy rollout has no analysis job: the step waits for it until the deadline, sends it again, and completes.
    expect((await call('POST', '/complete', { token: run.token })).json).toMatchObject({ status: 'complete', closed: true })
    const waited = await call('GET', '/rubric_status/wait?timeout_s=60', { token: run.token })
    expect(waited.status, waited.text).toBe(200)
    expect(waited.json).toMatchObject({ status: 'updated', step: 0, rollouts: 2, pending: 0 })

    await runInDurableObject(instance(), (_object, state) => {
      expect(columnsOf(state.storage.sql, 'ledger')).toEqual(expect.arrayContaining(['metadata', 'analysis_status', 'analysis_document', 'hacking', 'consumed_step']))
      expect(columnsOf(state.storage.sql, 'rubric_versions')).toEqual(expect.arrayContaining(['strategy', 'rationale', 'diff', 'refused']))
      const legacy = state.storage.sql.exec<{ score: number; metadata: string }>(`SELECT score, metadata FROM ledger WHERE rollout_id = 'legacy-1'`).one()
      expect(legacy.score).toBe(0.3)
      expect(JSON.parse(legacy.metadata)).toMatchObject({ current_step: 0, total_steps: 1 })
    })
    await runInDurableObject(coordinator(), (_object, state) => {
      expect(columnsOf(state.storage.sql, 'step_instances')).toEqual(expect.arrayContaining(['enqueued_at', 'outcome']))
    })
  })
})
