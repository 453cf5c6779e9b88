/**
 * The ledger shard's storage: its tables and every statement it runs (`LEDGER_SQL`, each checked by a query-plan test).
 */
import type { TableSchema } from '../schema.ts'

export const LEDGER_TABLES: Record<string, TableSchema> = {
  // Every query goes by (step) or (step, rollout_id): the key b-tree is the table, one row written per insert and per
  // delete.
  ledger: {
    columns: {
      step: 'INTEGER NOT NULL',
      rollout_id: 'TEXT NOT NULL',
      seq: 'INTEGER NOT NULL',
      rubric_version: 'INTEGER NOT NULL',
      score: 'REAL NOT NULL',
      cached: 'INTEGER NOT NULL',
      grp: 'TEXT NOT NULL',
      output_chars: 'INTEGER NOT NULL',
      output_hash: 'TEXT NOT NULL',
      tactics: 'TEXT',
      analysis: 'TEXT',
      created_at: 'INTEGER NOT NULL',
      judge_model: 'TEXT NOT NULL',
      criteria: 'TEXT NOT NULL',
      metadata: 'TEXT NOT NULL',
      rollout: 'TEXT NOT NULL',
      // Sync mode: the row's score is the one every answer gives from now on (settled, or kept as first answered).
      final: 'INTEGER NOT NULL DEFAULT 0',
      // From the request's arrival to the record (the judgement, mostly): a step's tally carries its longest.
      judged_in_ms: 'INTEGER NOT NULL DEFAULT 0',
    },
    constraints: ['PRIMARY KEY (step, rollout_id)'],
    withoutRowid: true,
  },
  // One row per step the shard took part in or learned the update of: the rubric version its rollouts are scored on
  // (null when it took none), the highest trainer step announced in it, the version its update left, and (counted
  // steps) the seats it leased there.
  shard_steps: {
    columns: {
      step: 'INTEGER PRIMARY KEY',
      version: 'INTEGER',
      trainer_step: 'INTEGER NOT NULL DEFAULT -1',
      updated_version: 'INTEGER',
      updated_at: 'INTEGER',
      leased: 'INTEGER NOT NULL DEFAULT 0',
    },
  },
}

/**
 * A row of `LEDGER_SQL.stepRollouts`: what a closed step's update reads of each rollout.
 */
export interface StepRolloutRow extends Record<string, SqlStorageValue> {
  rollout_id: string
  rubric_version: number
  score: number
  grp: string
  output_chars: number
  output_hash: string
  criteria: string
  tactics: string | null
  analysis: string | null
}

/** A row of `LEDGER_SQL.entry`: a rollout's answer. */
export type EntryRow = {
  step: number
  rollout_id: string
  rubric_version: number
  score: number
  criteria: string
  cached: number
  final: number
}

/** A row of `shard_steps`. */
export type ShardStepRow = {
  step: number
  version: number | null
  trainer_step: number
  updated_version: number | null
  updated_at: number | null
  leased: number
}

/**
 * Every statement the ledger runs, by name: each goes by a prefix of a primary key (a test reads their query plans).
 */
export const LEDGER_SQL = {
  entry:
    'SELECT step, rollout_id, rubric_version, score, criteria, cached, final FROM ledger ' +
    'WHERE step = ? AND rollout_id = ?',
  insert: `INSERT INTO ledger (step, rollout_id, seq, rubric_version, score, cached, grp, output_chars, output_hash,
      tactics, analysis, created_at, judge_model, criteria, metadata, rollout, judged_in_ms)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?, ?, ?)`,
  stepScores: 'SELECT score, rubric_version, judged_in_ms FROM ledger WHERE step = ?',
  stepRollouts:
    'SELECT rollout_id, rubric_version, score, grp, output_chars, output_hash, criteria, tactics, analysis ' +
    'FROM ledger WHERE step = ?',
  rollout:
    'SELECT step, rollout_id, rubric_version, score, criteria, cached, final, rollout, metadata ' +
    'FROM ledger WHERE step = ? AND rollout_id = ?',
  recordAnalysis:
    'UPDATE ledger SET analysis = ? WHERE step = ? AND rollout_id = ? ' +
    "AND (analysis IS NULL OR json_extract(analysis, '$.status') != 'done')",
  archiveStep:
    'SELECT step, rollout_id, rubric_version, score, criteria, cached, final, rollout, metadata, judge_model, ' +
    'created_at FROM ledger WHERE step = ? ORDER BY seq',
  deleteThrough: 'DELETE FROM ledger WHERE step <= ?',
  /** Sync mode: a row's score on the rubrics its step's update left, once; a final row is left as it is. */
  settle:
    'UPDATE ledger SET rubric_version = ?, score = ?, criteria = ?, cached = ?, judge_model = ?, final = 1 ' +
    'WHERE step = ? AND rollout_id = ? AND final = 0',
  /** Sync mode: a row keeps the score it was first answered with. */
  finalize: 'UPDATE ledger SET final = 1 WHERE step = ? AND rollout_id = ? AND final = 0',
  unsettled: 'SELECT count(*) AS n FROM ledger WHERE step = ? AND rubric_version != ? AND final = 0',
  stepCount: 'SELECT count(*) AS n FROM ledger WHERE step = ?',

  /** A step's row of `shard_steps`. */
  shardStep: 'SELECT * FROM shard_steps WHERE step = ?',
  /** The step's rubric version, and its trainer step raised: one row written, none when nothing changes. */
  pinStep: `INSERT INTO shard_steps (step, version, trainer_step) VALUES (?, ?, ?)
    ON CONFLICT (step) DO UPDATE SET version = coalesce(version, excluded.version),
      trainer_step = max(trainer_step, excluded.trainer_step)
    WHERE version IS NULL OR excluded.trainer_step > trainer_step`,
  /** The step's update committed, leaving `updated_version`; the first note stands. */
  noteUpdate: `INSERT INTO shard_steps (step, updated_version, updated_at) VALUES (?, ?, ?)
    ON CONFLICT (step) DO UPDATE SET updated_version = excluded.updated_version, updated_at = excluded.updated_at
    WHERE updated_version IS NULL`,
  /** The seats of a counted step the shard holds (its lease, absolute). */
  setLeased: `INSERT INTO shard_steps (step, leased) VALUES (?, ?)
    ON CONFLICT (step) DO UPDATE SET leased = excluded.leased WHERE leased != excluded.leased`,
  /** The newest step whose update committed: walks the key down from the newest step. */
  updatedThrough:
    'SELECT step FROM shard_steps WHERE step >= 0 AND updated_version IS NOT NULL ORDER BY step DESC LIMIT 1',
  /** Step rows up to the first `?` whose ledger rows are gone, but never the newest updated (the second `?`). */
  forgetStepsThrough: 'DELETE FROM shard_steps WHERE step <= ? AND step < ?',
} as const
