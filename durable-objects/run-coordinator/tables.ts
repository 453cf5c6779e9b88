/**
 * The coordinator's storage: its tables and the rows as they are read (the statements its modules run are
 * `COORDINATOR_SQL`, in statements.ts).
 */
import type { RubricStatus, StepStatus } from '../../src/schemas/status.ts'
import type { ScoreTally } from '../../src/scoring/tally.ts'
import type { TableSchema } from '../schema.ts'

/**
 * Updated steps kept, counted back from the newest updated one: older updated steps leave every table (their rollouts
 * stay summed in meta `updated_rollouts`, their LLM calls in step -1's sums), so `steps` holds at most this many
 * updated rows plus the steps not yet updated.
 */
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
      // The budget that kept the step's update from running (`budgets.updates_per_window`), when one did.
      skipped: 'TEXT',
    },
  },
  // When each step update the run started began (ms), for `budgets.updates_per_window`: rows older than the window go.
  update_starts: {
    columns: { at: 'INTEGER NOT NULL', step: 'INTEGER NOT NULL' },
    constraints: ['PRIMARY KEY (at, step)'],
    withoutRowid: true,
  },
  // A shard's tally of a step (as it last reported it) and, once the step closed, how many of its rollouts the step
  // holds; for a counted step, the seats it leased there and how many of them it has taken (its rows).
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
      leased: 'INTEGER NOT NULL DEFAULT 0',
      taken: 'INTEGER NOT NULL DEFAULT 0',
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
      // How many times the job was sent, when a run of it last said it is at work (ms), and which queue message's run
      // claimed it (a job that may have a twin claims it first).
      sends: 'INTEGER NOT NULL DEFAULT 0',
      alive_at: 'INTEGER',
      claimed_by: 'TEXT',
      // How far the running update has got (`UpdateProgress` JSON), as its last heartbeat said.
      progress: 'TEXT',
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
  // The batches of LLM calls taken from the Worker's isolates in the last hour, by id (time first): a batch sent
  // again is not added twice.
  llm_batches: {
    columns: { id: 'TEXT PRIMARY KEY' },
    withoutRowid: true,
  },
  // Step -1 holds the sums of the steps older than the last DETAILED_STEPS.
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
  leased: number
  taken: number
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
  skipped: string | null
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
