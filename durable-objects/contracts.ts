/**
 * What the Worker and the Durable Objects say to each other: the shapes of their RPC arguments and answers, in one
 * module that imports no object, so neither side depends on the other's code.
 */
import type { AnalysisReason } from '../src/analysis/index.ts'
import type { BudgetRefusal } from '../src/budgets/index.ts'
import type { Rollout, TrainingMetadata } from '../src/schemas/rollout.ts'
import type { RubricSnapshot } from '../src/schemas/rubric.ts'
import type { CriterionGrade } from '../src/schemas/score.ts'
import type { ScoreTally } from '../src/scoring/tally.ts'

/** One ledger shard: a slice, by rollout-id hash, of one run × instance's step ledger. */
export interface ShardAddress {
  runId: string
  instanceId: string
  shard: number
}

export interface InstanceAddress {
  runId: string
  instanceId: string
}

/** One rollout's first score in a step: what every later request for the same id gets back. */
export interface LedgerEntry {
  rollout_id: string
  step: number
  rubric_version: number
  score: number
  criteria: CriterionGrade[]
  cached: boolean
}

/** A judgement of a rollout, as the isolate hands it to the ledger. */
export interface Judged {
  rubricVersion: number
  score: number
  criteria: CriterionGrade[]
  /** The judgement came from the isolate's score cache, not from a model call. */
  cached: boolean
  /** The scoring model, as the archive names it: `backend:model`. */
  judgeModel: string
}

/** A rollout handed to its ledger shard: with its judgement to record it, without one to ask whether it needs one. */
export interface Submission {
  rollout: Rollout
  metadata: TrainingMetadata
  judged?: Judged
  /** Injection tactics the cheap check found in the output (`injectionTactics`). */
  tactics?: string[]
  /** How long the rollout took from its request's arrival to this record, in ms: the idle gap allows for it. */
  judgedInMs?: number
}

export type ShardAnswer =
  /** Recorded now (`duplicate: false`), or earlier in this step (`duplicate: true`: the first score stands). */
  | { kind: 'recorded'; entry: LedgerEntry; duplicate: boolean }
  /** Not seen in this step and sent without a judgement: judge it with the snapshot of the reply. */
  | { kind: 'judge' }
  /** Not recorded: a budget of the run refused it (`budgets.instances_per_step`). */
  | { kind: 'refused'; refusal: BudgetRefusal }
  /**
   * Not recorded, and nothing else in the request changed: `payload_too_large` (its stored form would pass what a row
   * holds), `overloaded` (no seat of a counted step could be had now: retry), or `internal` (its row failed).
   */
  | { kind: 'failed'; code: 'payload_too_large' | 'overloaded' | 'internal'; message: string }

export interface RecordReply {
  answers: ShardAnswer[]
  /** The rubrics to judge on, when the caller's version differs or an answer asks for a judgement. */
  snapshot?: RubricSnapshot
  /** The snapshot is the version the shard's step is scored on (else the newest the shard knows: a guess). */
  pinned?: boolean
}

export type { LlmStat } from '../src/llm/stats.ts'

/** A shard's report to its run's coordinator: its current step's tally (absolute, so a repeat changes nothing). */
export interface ShardReport {
  instanceId: string
  shard: number
  step: number
  tally: ScoreTally
  /** Counted steps: the seats of `step` the shard has taken (its rows there). */
  taken?: number
}

/** The coordinator closed `step`: rollouts from now on belong to a later step. */
export interface CloseNotice {
  step: number
}

/**
 * A shard is about to record rollouts: its first of its step, rollouts of a later trainer step, or (counted steps)
 * more than the seats it holds, which it asks to lease from the collecting step.
 */
export interface Announce {
  instanceId: string
  shard: number
  /** The shard's current step, -1 when it has none. */
  shardStep: number
  /** The highest `metadata.current_step` of the rollouts it is about to record, when they carry one. */
  trainerStep?: number
  /** The newest rubric version the shard knows of. */
  newestVersion: number
  /** The rubric version each rollout about to be recorded was judged on, in order: one seat asked for each. */
  versions?: number[]
  /**
   * Counted steps: the seats of `shardStep` the shard holds, as it knows them (its lease). A coordinator that leased
   * it more answers that lease again instead of a new one, so an ask sent again is harmless.
   */
  leased?: number
  /** Counted steps: the seats of `shardStep` the shard has taken (its rows there). */
  taken?: number
}

export interface CoordinatorReply {
  /** The step the run is collecting. */
  step: number
  /** Closes the shard has not applied yet, oldest first. */
  closes: CloseNotice[]
  /**
   * The rubric version the instance's rollouts of `step` are scored on, in the reply to an announce (which registers
   * the shard there): the same for every shard of the instance.
   */
  version?: number
  /** When the collecting step closes by idle gap if no rollout arrives before (ms); none when it does not. */
  idleDeadline?: number
  /** The run closes steps by count: a shard records new rollouts only in the seats it leased. */
  counted?: boolean
  /** Counted steps: the seats of `step` this shard holds (absolute): its lease, those it has taken included. */
  leased?: number

  /**
   * The announce was refused by a budget (its instance would be one more than `budgets.instances_per_step` in the
   * collecting step): the shard is not registered, and its rollouts are not recorded.
   */
  refused?: BudgetRefusal
}

/** What the step update reads of one rollout of a closed step. */
export interface StepRollout {
  shard: number
  rollout_id: string
  step: number
  rubric_version: number
  score: number
  group: string
  output_chars: number
  output_hash: string
  grades: Record<string, number>
  tactics: string[]
  analysis: RolloutAnalysis | null
}

/** How a rollout's deep analysis ended, kept on its ledger row. */
export type RolloutAnalysis =
  | { status: 'done'; document_id: string; hacking: boolean; reasons: AnalysisReason[] }
  | { status: 'failed'; reasons: AnalysisReason[] }

/** A recorded rollout in full, for its analysis. */
export interface RecordedRollout {
  entry: LedgerEntry
  rollout: Rollout
  metadata: TrainingMetadata
}

/** Run one instance's update for a closed step (sent by the RunCoordinator's alarm). */
export interface StepJob {
  type: 'step'
  runId: string
  instanceId: string
  step: number
  /** The instance's ledger shards that took part in the step. */
  shards: { shard: number }[]
  /**
   * How many times the coordinator sent this job before (a lost message, a queue backlog, a job gone silent): such a
   * job, or one that waited long in the queue, first claims its update (`RunCoordinator.claimStepJob`), so two runs of
   * one update never work at once.
   */
  resends?: number
  /**
   * The step closed with its update skipped, by the budget this names (`budgets.updates_per_window`): the job commits
   * no change and makes no LLM call. `rollouts`: the instance's rollouts in the step, as its shards reported them.
   */
  skip?: { budget: string; rollouts: number }
}
