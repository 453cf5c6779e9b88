import { z } from 'zod'

/** Why a rollout was chosen for a deep analysis. Suspicious reasons come first, then coverage. */
export const ANALYSIS_REASONS = [
  'injection',
  'short_high_score',
  'templated',
  'unusual_grade',
  'group_best',
  'group_worst',
  'score_range',
] as const

/** Where a run's current step is: no rollouts yet, taking rollouts, running its update, or done. */
export const StepStatus = z.enum(['idle', 'collecting', 'updating', 'updated'])
export type StepStatus = z.infer<typeof StepStatus>

/** How many analysed rollouts were chosen for each reason (a rollout may have several). */
export const AnalysisReasonCounts = z.partialRecord(z.enum(ANALYSIS_REASONS), z.number().int())
export type AnalysisReasonCounts = z.infer<typeof AnalysisReasonCounts>

/**
 * How one instance's step update ended.
 * @example StepUpdateOutcome.parse({ rubric_version: 2, changed: true, rollouts: 64, analysed: 8, failed: 0, reasons: {
 *   group_best: 4 }, hacking_flags: 1, strategy: 'CORRECTIVE', refused: [] })
 */
export const StepUpdateOutcome = z.object({
  rubric_version: z.number().int(),
  changed: z.boolean(),
  /** Rollouts of the instance in the step. */
  rollouts: z.number().int(),
  /** Rollouts given a deep analysis, and those whose analysis failed after its retries. */
  analysed: z.number().int(),
  failed: z.number().int(),
  reasons: AnalysisReasonCounts,
  /** Analysed rollouts the analyzer flagged as reward hacking. */
  hacking_flags: z.number().int(),
  strategy: z.string().nullable(),
  /**
   * Parts of the updater's proposal that were refused (e.g. touching an anchor), even when no new version came of it.
   */
  refused: z.array(z.string()),
  error: z.string().optional(),
  /**
   * The run budget (its config key, `budgets.updates_per_window`) that kept this update from running: no LLM call was
   * made and the rubrics stay as they were.
   */
  skipped: z.string().optional(),
  /** The audit of the step's sampled scores by a second model (run config `audit`), when the run asks for one. */
  audit: z
    .object({
      /** The auditor's model, as the call log names it. */
      auditor: z.string(),
      /** Scores sampled, and those the auditor graded (the rest failed after retries). */
      sampled: z.number().int(),
      judged: z.number().int(),
      /** Mean of |judge score − auditor score| over the judged ones (scores in [0, 1]); null when none was judged. */
      mean_abs_diff: z.number().nullable(),
      /** Spearman's rank correlation of the two scores; null under two judged or when either side is constant. */
      rank_corr: z.number().nullable(),
    })
    .optional(),
})
export type StepUpdateOutcome = z.infer<typeof StepUpdateOutcome>

/**
 * How far a running step update has got, as its job last said (its heartbeat, every `STEP_HEARTBEAT_S`): the phase it
 * is in and the deep analyses chosen, done and failed so far.
 * @example UpdateProgress.parse({ phase: 'analysing', analyses: { selected: 8, done: 3, failed: 0 }, at: '…' })
 */
export const UpdateProgress = z.object({
  phase: z.enum(['reading', 'analysing', 'summarising', 'updating']),
  analyses: z.object({ selected: z.number().int(), done: z.number().int(), failed: z.number().int() }),
  /** When the job said so (ISO 8601). */
  at: z.string(),
})
export type UpdateProgress = z.infer<typeof UpdateProgress>

/**
 * What `GET /rubric_status` answers.
 * @example const s: RubricStatus = { run_id: 'default', step: 0, status: 'idle', rubric_version: 1, instances: [],
 *   pending: 0, rollouts: 0, mode: 'async', analyses: { analysed: 0, failed: 0, reasons: {} }, hacking_flags: 0 }
 */
export const RubricStatus = z.object({
  run_id: z.string(),
  step: z.number().int().nonnegative(),
  status: StepStatus,
  /** Highest rubric version among the run's instances. */
  rubric_version: z.number().int().positive(),
  /** Instances touched in the reported step, with their rubric versions. */
  instances: z.array(
    z.object({
      instance_id: z.string(),
      rubric_version: z.number().int().positive(),
      rollouts: z.number().int(),
      /** Present once the instance's update for this step is done. */
      update: StepUpdateOutcome.optional(),
      /** While the instance's update runs: how far it has got, as of its job's last heartbeat. */
      progress: UpdateProgress.optional(),
    }),
  ),
  /**
   * The deep analyses of the step's finished updates: how many, how many failed, and why their rollouts were chosen.
   */
  analyses: z.object({ analysed: z.number().int(), failed: z.number().int(), reasons: AnalysisReasonCounts }),
  /** Rollouts of the step the analyzer flagged as reward hacking. */
  hacking_flags: z.number().int(),
  /** Instances of the closed step whose update has not finished. */
  pending: z.number().int().nonnegative(),
  /** Distinct rollouts counted in the reported step (ledger shards report them within about a second). */
  rollouts: z.number().int().nonnegative(),
  mode: z.enum(['async', 'sync']),
  /** Why the reported step is still open, when it is collecting: what will close it. */
  closes_when: z.string().optional(),
  /**
   * What closed the reported step: `complete` (POST /complete), `count` (rollouts_per_step), `step_advance` (a rollout
   * of a later `metadata.current_step`) or `idle` (close_after_idle_s without a rollout).
   */
  closed_by: z.enum(['complete', 'count', 'step_advance', 'idle']).optional(),
  /**
   * The run budget (its config key) that skipped the reported step's update: `budgets.updates_per_window` was spent
   * when the step closed by count, a later trainer step or the idle gap. Its rollouts and scores stay.
   */
  update_skipped: z.string().optional(),
})
export type RubricStatus = z.infer<typeof RubricStatus>
