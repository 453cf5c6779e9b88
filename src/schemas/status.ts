import { z } from 'zod'

/** Where a run's current step is: no rollouts yet, taking rollouts, running its update, or done. */
export const StepStatus = z.enum(['idle', 'collecting', 'updating', 'updated'])
export type StepStatus = z.infer<typeof StepStatus>

/**
 * What `GET /rubric_status` answers.
 * @example const s: RubricStatus = { run_id: 'default', step: 0, status: 'idle', rubric_version: 1, instances: [], pending: 0, rollouts: 0, mode: 'async', analyses: { analysed: 0, late: 0, failed: 0, missing: 0 }, hacking_flags: 0 }
 */
export const RubricStatus = z.object({
  run_id: z.string(),
  step: z.number().int().nonnegative(),
  status: StepStatus,
  /** Highest rubric version among the run's instances. */
  rubric_version: z.number().int().positive(),
  /** Instances touched in the reported step, with their rubric versions. */
  instances: z.array(z.object({
    instance_id: z.string(),
    rubric_version: z.number().int().positive(),
    rollouts: z.number().int(),
    /** Present once the instance's update for this step is done. */
    update: z.object({
      rubric_version: z.number().int(),
      changed: z.boolean(),
      analysed: z.number().int(),
      late: z.number().int(),
      failed: z.number().int(),
      missing: z.number().int(),
      hacking_flags: z.number().int(),
      strategy: z.string().nullable(),
      refused: z.array(z.string()),
      error: z.string().optional(),
    }).optional(),
  })),
  /** Analyses the step's finished updates worked from: on time, late (from earlier steps), failed (dead-lettered), missing (past the deadline). */
  analyses: z.object({ analysed: z.number().int(), late: z.number().int(), failed: z.number().int(), missing: z.number().int() }),
  /** Rollouts of the step the analyzer flagged as reward hacking. */
  hacking_flags: z.number().int(),
  /** Instances of the closed step whose update has not finished. */
  pending: z.number().int().nonnegative(),
  /** Distinct rollouts counted in the reported step. */
  rollouts: z.number().int().nonnegative(),
  mode: z.enum(['async', 'sync']),
})
export type RubricStatus = z.infer<typeof RubricStatus>
