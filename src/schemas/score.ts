import { z } from 'zod'

/**
 * The grade scale is explicit: integers from 0 to `max`, never a guess between 0–1 and 0–5.
 * @example gradeScale(10).parse(7) // 7
 */
export const gradeScale = (max: number) => z.number().int().min(0).max(max)

/**
 * One criterion's verdict inside a score.
 * @example CriterionGrade.parse({ rubric_id: 'anchor-1', grade: 8, weight: 2, reason: 'correct' })
 */
export const CriterionGrade = z.object({
  rubric_id: z.string(),
  grade: z.number().int().nonnegative(),
  weight: z.number().positive(),
  /** True for a penalty rubric: the grade says how much the response does the bad thing. */
  penalty: z.boolean().optional(),
  reason: z.string().optional(),
  /**
   * Verdict judging (`judging: "verdicts"`): the judge's probability that the criterion is met (for a penalty, that
   * the answer does it). The reward reads it in place of `grade`, which is its nearest point on the scale.
   */
  probability: z.number().min(0).max(1).optional(),
})
export type CriterionGrade = z.infer<typeof CriterionGrade>

/**
 * What `POST /score` answers.
 * @example const result: ScoreResult = { score: 0.8, rubric_version: 1, instance_id: 'global', criteria: [],
 *   request_id: 'x', step: 0, duplicate: false, grade_max: 10 }
 */
export const ScoreResult = z.object({
  score: z.number().min(0).max(1),
  rubric_version: z.number().int().positive(),
  instance_id: z.string(),
  criteria: z.array(CriterionGrade),
  request_id: z.string(),
  run_id: z.string(),
  rollout_id: z.string(),
  step: z.number().int().nonnegative(),
  grade_max: z.number().int().positive(),
  /** True when this rollout id was already scored in this step and the first score is returned. */
  duplicate: z.boolean(),
  /** True when an identical judgement was served from the score cache without an LLM call. */
  cached: z.boolean(),
  /**
   * Sync mode only: the step's update did not finish within the run's `max_wait_s`; the score is on the older rubrics.
   */
  update_pending: z.boolean().optional(),
})
export type ScoreResult = z.infer<typeof ScoreResult>
