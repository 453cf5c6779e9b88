import { z } from 'zod'
import { TrainingMetadata } from './rollout.ts'
import { Trajectory } from './trajectory.ts'
import { Rubric } from './rubric.ts'
import { CriterionGrade } from './score.ts'

/**
 * One scored rollout as the run's archive keeps it (an R2 line written when the step's rows leave the ledger).
 * @example ArchivedRollout.parse({ run_id: 'grpo-1', instance_id: 'global', shard: 3, step: 0, rollout_id: 'r1', input:
 *   'What is 2+2?', output: '4', reference: '4', metadata, score: 0.9, criteria: [], rubric_version: 1, judge_model:
 * 'mock:mock-heuristic-1',
 *   cached: false, scored_at: '2026-11-25T10:00:00.000Z' })
 */
export const ArchivedRollout = z.object({
  kind: z.literal('rollout').optional(),
  run_id: z.string().min(1),
  instance_id: z.string().min(1),
  shard: z.number().int().nonnegative(),
  step: z.number().int().nonnegative(),
  rollout_id: z.string().min(1),
  input: z.string(),
  output: z.string(),
  reference: z.string().nullable(),
  /** The trajectory, when the rollout was sent as one (`rollout.messages`): `input`/`output` are its text. */
  messages: Trajectory.optional(),
  metadata: TrainingMetadata,
  score: z.number().min(0).max(1),
  criteria: z.array(CriterionGrade),
  rubric_version: z.number().int().positive(),
  judge_model: z.string(),
  cached: z.boolean(),
  scored_at: z.string(),
})
export type ArchivedRollout = z.infer<typeof ArchivedRollout>

/**
 * The first line of an archive stream: how the run judges (what a re-judgement must use to be the same judgement).
 * @example ArchiveRunLine.parse({ kind: 'run', run_id: 'grpo-1', from_step: 0, to_step: null, grade_max: 10, locale:
 *   'en', prompts: {} })
 */
export const ArchiveRunLine = z.object({
  kind: z.literal('run'),
  run_id: z.string().min(1),
  from_step: z.number().int().nonnegative(),
  to_step: z.number().int().nonnegative().nullable(),
  grade_max: z.number().int().min(1),
  locale: z.enum(['en', 'zh']),
  prompts: z.record(z.string(), z.string()).default({}),
})
export type ArchiveRunLine = z.infer<typeof ArchiveRunLine>

/**
 * The rubrics of one instance's version, sent before the first rollout that was scored on them.
 * @example ArchiveRubricsLine.parse({ kind: 'rubrics', instance_id: 'global', rubric_version: 2, rubrics })
 */
const ArchiveRubricsLine = z.object({
  kind: z.literal('rubrics'),
  instance_id: z.string().min(1),
  rubric_version: z.number().int().positive(),
  rubrics: z.array(Rubric).min(1),
})

/**
 * The last line of a response that stopped early (one response reads a bounded number of objects): ask again
 * with `after` to go on.
 * @example ArchiveMoreLine.parse({ kind: 'more', after: 'runs/grpo-1/steps/000012/global.3.ndjson' })
 */
const ArchiveMoreLine = z.object({ kind: z.literal('more'), after: z.string().min(1) })

/** Any line of `GET /runs/:runId/archive` (a rollout line may leave out `kind`). */
export const ArchiveLine = z.union([ArchiveRunLine, ArchiveRubricsLine, ArchiveMoreLine, ArchivedRollout])
export type ArchiveLine = z.infer<typeof ArchiveLine>
