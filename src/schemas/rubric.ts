import { z } from 'zod'
import { strict } from './strict.ts'

/** Metadata values stay flat (string, number, boolean, null) so they cross RPC and SQL unchanged. */
const JsonScalar = z.union([z.string(), z.number(), z.boolean(), z.null()])

/**
 * One criterion the judge grades. Anchors come from the run's config and are never changed by evolution.
 * @example Rubric.parse({ id: 'anchor-1', text: 'The final answer is correct.', weight: 2, is_anchor: true, version: 1,
 *   created_at: '2026-01-01T00:00:00.000Z', metadata: {} })
 */
export const Rubric = z.object({
  id: z.string().min(1).max(128),
  text: z.string().min(1).max(4_000),
  weight: z.number().positive().max(1_000),
  is_anchor: z.boolean(),
  /**
   * `penalty`: graded for how much the response does the bad thing the text names, and lowers the score (see
   * `rewardFromGrades`); absent: an ordinary criterion, graded for how well it is met.
   */
  kind: z.enum(['criterion', 'penalty']).optional(),
  version: z.number().int().positive(),
  created_at: z.string(),
  metadata: z.record(z.string(), JsonScalar),
})
export type Rubric = z.infer<typeof Rubric>

/**
 * How a run's config names a rubric; ids and versions are filled in when the run starts.
 * @example RubricSeed.parse({ text: 'Shows the working.', weight: 1 })
 */
export const RubricSeed = z
  .object({
    id: z
      .string()
      .min(1)
      .max(128)
      .regex(/^[\w.:-]+$/, 'letters, digits, and . _ : - only')
      .optional(),
    text: z.string().min(1).max(4_000),
    weight: z.number().positive().max(1_000).default(1),
    /** `penalty` for a rubric that names what a response must not do (see `Rubric.kind`). */
    kind: z.enum(['criterion', 'penalty']).optional(),
    metadata: z.record(z.string(), JsonScalar).default({}),
  })
  .apply(strict)
export type RubricSeed = z.input<typeof RubricSeed>

/**
 * The rubrics in force for one instance at one version: what a score was computed against.
 * @example const snapshot: RubricSnapshot = { instance_id: 'global', version: 1, rubrics: [...] }
 */
export const RubricSnapshot = z.object({
  instance_id: z.string(),
  version: z.number().int().positive(),
  rubrics: z.array(Rubric).min(1),
})
export type RubricSnapshot = z.infer<typeof RubricSnapshot>
