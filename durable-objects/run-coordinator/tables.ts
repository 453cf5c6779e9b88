/**
 * The coordinator's storage: its tables, the statements run from more than one module (`COORDINATOR_SQL`, each
 * checked by a query-plan test), and the rows as they are read.
 */
import type { RubricStatus, StepStatus } from '../../src/schemas/status.ts'
import type { ScoreTally } from '../../src/scoring/tally.ts'
import type { TableSchema } from '../schema.ts'

/** Steps whose per-shard and per-instance rows are kept; older steps keep their summary row only. */
export const DETAILED_STEPS = 200

/** `closing` is internal: the step stopped taking rollouts and its shards are being told; readers see `updating`. */
type StoredStepStatus = 'collecting' | 'closing' | 'updating' | 'updated'

export const COORDINATOR_TABLES: Record<string, TableSchema> = {
  steps: {
    columns: {
      step: 'INTEGER PRIMARY KEY',
      status: 'TEXT NOT NULL',
      opened_at: 'TEXT NOT NULL',
      closed_at: 'TEXT',
      updated_at: 'TEXT',
      // The highest `metadata.current_step` the step's rollouts carried (as the shards announced it), and why it
      // closed.
      trainer_step: 'INTEGER',
      closed_by: 'TEXT',
      // The step's scores summed over its shards, written when the step is updated (its shard rows go some steps
      // later).
      tally: 'TEXT',
    },
  },
  // A shard's tally of a step (as it last reported it) and, once the step closed, how many of its rollouts the step
  // keeps.
  step_shards: {
    columns: {
      step: 'INTEGER NOT NULL',
      instance_id: 'TEXT NOT NULL',
      shard: 'INTEGER NOT NULL',
      tally: 'TEXT NOT NULL',
      keep: 'INTEGER',
      acked: 'INTEGER NOT NULL DEFAULT 0',
      // The rubric version the instance's rollouts of the step are scored on, the same in every row of one step and
      // instance: fixed by the first row (`pinnedVersion`).
      version: 'INTEGER',
      // When the shard last brought new rollouts of the step (ms): the idle gap is measured from the newest.
      last_at: 'INTEGER NOT NULL DEFAULT 0',
    },
    constraints: ['PRIMARY KEY (step, instance_id, shard)'],
    withoutRowid: true,
  },
  step_instances: {
    columns: {
      step: 'INTEGER NOT NULL',
      instance_id: 'TEXT NOT NULL',
      rubric_version: 'INTEGER NOT NULL',
      rollouts: 'INTEGER NOT NULL DEFAULT 0',
      updated: 'INTEGER NOT NULL DEFAULT 0',
      enqueued_at: 'INTEGER',
      outcome: 'TEXT',
    },
    constraints: ['PRIMARY KEY (step, instance_id)'],
    withoutRowid: true,
  },
  instances: {
    columns: {
      instance_id: 'TEXT PRIMARY KEY',
      rubric_version: 'INTEGER NOT NULL',
      rollouts: 'INTEGER NOT NULL',
      last_step: 'INTEGER NOT NULL',
    },
    withoutRowid: true,
  },
  // Step -1 holds the sums of steps older than DETAILED_STEPS.
  llm_stats: {
    columns: {
      step: 'INTEGER NOT NULL',
      role: 'TEXT NOT NULL',
      model: 'TEXT NOT NULL',
      outcome: 'TEXT NOT NULL',
      calls: 'INTEGER NOT NULL',
      latency_ms: 'INTEGER NOT NULL',
      prompt_tokens: 'INTEGER NOT NULL',
      completion_tokens: 'INTEGER NOT NULL',
    },
    constraints: ['PRIMARY KEY (step, role, model, outcome)'],
    withoutRowid: true,
  },
}

/** The step_shards statements written from more than one place, by name. */
export const COORDINATOR_SQL = {
  /** A shard's tally of a step (absolute), registering it there; a confirmed close's row is left as confirmed. */
  upsertShard: `INSERT INTO step_shards (step, instance_id, shard, tally, version, last_at) VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (step, instance_id, shard) DO UPDATE SET tally = excluded.tally,
      last_at = max(last_at, excluded.last_at) WHERE acked = 0`,
  /** A shard about to take rollouts in a step: registered with an empty tally, or its arrival time moved on. */
  announceShard: `INSERT INTO step_shards (step, instance_id, shard, tally, version, last_at) VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (step, instance_id, shard) DO UPDATE SET last_at = max(last_at, excluded.last_at)`,
  pinnedVersion: 'SELECT version FROM step_shards WHERE step = ? AND instance_id = ? AND version IS NOT NULL LIMIT 1',
  committedVersion: 'SELECT rubric_version FROM instances WHERE instance_id = ?',
  lastRolloutAt: 'SELECT max(last_at) AS at FROM step_shards WHERE step = ?',
} as const

/** A shard's row of a step (`step_shards`). */
export type ShardRow = {
  step: number
  instance_id: string
  shard: number
  tally: string
  keep: number | null
  acked: number
  version: number | null
  last_at: number
}

/** A step's row (`steps`). */
export type StepRow = {
  step: number
  status: StoredStepStatus
  opened_at: string
  closed_at: string | null
  updated_at: string | null
  tally: string | null
  trainer_step: number | null
  closed_by: CloseReason | null
}

/**
 * What closed a step: the trainer's /complete, `rollouts_per_step`, a rollout of a later trainer step, or the idle gap.
 */
export type CloseReason = NonNullable<RubricStatus['closed_by']>

/**
 * A shard row's tally, as the shard last reported it.
 * @example tallyOf(row).rollouts // 12
 */
export function tallyOf(row: ShardRow): ScoreTally {
  return JSON.parse(row.tally) as ScoreTally
}

/**
 * A stored step status as readers see it: `closing` reads as `updating`.
 * @example publicStatus('closing') // 'updating'
 */
export function publicStatus(status: StoredStepStatus): Exclude<StepStatus, 'idle'> {
  return status === 'closing' ? 'updating' : status
}
