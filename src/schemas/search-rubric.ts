/**
 * The rubric an offline search evolves (and an RM artifact carries): weighted criteria graded on a stated scale.
 * A schema here, below the search that evolves it and the artifacts that ship it.
 */
import { z } from 'zod'

export const CRITERION_TYPES = ['factual', 'format', 'reasoning', 'safety', 'style'] as const

export const Criterion = z.object({
  criterion_id: z.string().min(1).max(128),
  text: z.string().min(1).max(4_000),
  weight: z.number().min(0).max(1_000).default(1),
  criterion_type: z.enum(CRITERION_TYPES).nullable().default(null),
  check_points: z.array(z.string()).default([]),
  positive_examples: z.array(z.string()).default([]),
  negative_examples: z.array(z.string()).default([]),
})
export type Criterion = z.infer<typeof Criterion>

/** Grades are integers 0..grade_max, stated in every verifier prompt (fixes autosr §8.1). */
const GradingProtocol = z.object({
  grade_max: z.number().int().min(1).max(100).default(10),
  allow_na: z.boolean().default(true),
  num_votes: z.number().int().min(1).max(15).default(1),
})

export const SearchRubric = z.object({
  rubric_id: z.string().min(1),
  criteria: z.array(Criterion).min(1),
  grading_protocol: GradingProtocol.default({ grade_max: 10, allow_na: true, num_votes: 1 }),
  metadata: z.record(z.string(), z.unknown()).default({}),
})
export type SearchRubric = z.infer<typeof SearchRubric>

/** Rubrics `parseSearchRubric` returned: zod's output is final, so validating the same object again can be skipped. */
const parsedRubrics = new WeakSet<SearchRubric>()

/**
 * `SearchRubric.parse`, remembering its output so `isParsedSearchRubric` spares a second parse of the same object
 * (the search validates every role's rubric; its own roles already return parsed ones).
 * @example const rubric = parseSearchRubric({ rubric_id: 'p1_r0', criteria: [{ criterion_id: 'c1', text: 'Cites' }] })
 */
export function parseSearchRubric(value: unknown): SearchRubric {
  const rubric = SearchRubric.parse(value)
  parsedRubrics.add(rubric)
  return rubric
}

/**
 * A rubric built from parts zod already produced (each criterion from `Criterion`, at least one; a parsed rubric's
 * grading protocol), taken as parsed without validating them all again: the search builds one per proposal.
 * @example const child = rubricFromParsedParts({ rubric_id: 'p1_r0_m1', criteria, grading_protocol, metadata: {} })
 */
export function rubricFromParsedParts(rubric: SearchRubric): SearchRubric {
  if (rubric.rubric_id === '' || rubric.criteria.length === 0)
    throw new RangeError('a rubric needs an id and at least one criterion')
  parsedRubrics.add(rubric)
  return rubric
}

/**
 * Whether `value` is a rubric `parseSearchRubric` or `rubricFromParsedParts` returned (and so already valid).
 * @example isParsedSearchRubric(parseSearchRubric(raw)) // true
 */
export function isParsedSearchRubric(value: unknown): value is SearchRubric {
  return typeof value === 'object' && value !== null && parsedRubrics.has(value as SearchRubric)
}
