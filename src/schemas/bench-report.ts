/**
 * The benchmark report of `reward-harness bench --json` (or `--out`), read back by `reward-harness report`.
 */
import { z } from 'zod'

/** How a tie (equal scores) counts: half a correct answer, or wrong. Ties are always counted and reported. */
export const TIE_POLICIES = ['half', 'wrong'] as const
export type TiePolicy = (typeof TIE_POLICIES)[number]

const Interval = z.tuple([z.number(), z.number()]).nullable()

/** An accuracy with its counts and Wilson 95% interval (successes include half ties under the `half` policy). */
export const BenchAccuracy = z.object({
  /** Judged comparisons or items (failures excluded). */
  n: z.number(),
  correct: z.number(),
  wrong: z.number(),
  ties: z.number(),
  failures: z.number(),
  /** (correct + ties·w) / n with w = 0.5 (`half`) or 0 (`wrong`); null when n = 0. */
  accuracy: z.number().nullable(),
  ci95: Interval,
  /** Percentile bootstrap 95% interval (only when asked for). */
  bootstrap95: Interval.optional(),
})
export type BenchAccuracy = z.infer<typeof BenchAccuracy>

/** Every metric of a benchmark, overall or for one group. */
export const BenchMetrics = z.object({
  items: z.number(),
  /** Items the scorer failed on (any candidate the item needs). */
  failed_items: z.number(),
  pairwise: z.object({ ab: BenchAccuracy, ba: BenchAccuracy, swap_consistent: BenchAccuracy }).nullable(),
  kway: BenchAccuracy.nullable(),
  /** All label-ordered pairs within items of more than 2 candidates. */
  pairs_within_kway: BenchAccuracy.nullable(),
  tail: BenchAccuracy.nullable(),
})
export type BenchMetrics = z.infer<typeof BenchMetrics>

/** One failed candidate, as reported. */
export const BenchFailure = z.object({ prompt_id: z.string(), candidate_id: z.string(), error: z.string() })
export type BenchFailure = z.infer<typeof BenchFailure>

/**
 * The result of a benchmark run.
 * @example BenchReport.parse(JSON.parse(text)).overall.pairwise?.ab.accuracy
 */
export const BenchReport = z.object({
  schema_version: z.literal(1),
  dataset: z.object({
    path: z.string(),
    sha256: z.string(),
    shape: z.string(),
    items: z.number(),
    candidates: z.number(),
  }),
  scorer: z.string(),
  /**
   * Items graded with a rubric of their own prompt (a search's or an artifact's rubric for that prompt_id, not
   * `__default__`): the rubric was searched on those very candidates, so their accuracy measures the fit, not how it
   * generalises (absent in older reports).
   */
  in_sample: z.object({ items: z.number(), of: z.number() }).optional(),
  /** The model verifier-based scorers grade with (`mock:mock-heuristic-1` by default; unused by url:). */
  model: z.string(),
  seed: z.number(),
  ties: z.enum(TIE_POLICIES),
  bootstrap: z.number(),
  overall: BenchMetrics,
  groups: z.record(z.string(), BenchMetrics),
  failures: z.object({
    count: z.number(),
    items: z.number(),
    examples: z.array(BenchFailure),
    /** Each distinct error once with how many candidates it failed, most first (absent in older reports). */
    by_error: z.array(z.object({ error: z.string(), count: z.number() })).optional(),
  }),
  scores: z.array(
    z.object({
      prompt_id: z.string(),
      group: z.string(),
      candidates: z.array(
        z.object({
          candidate_id: z.string(),
          truth: z.number().nullable(),
          score: z.number().nullable(),
          error: z.string().optional(),
        }),
      ),
    }),
  ),
  elapsed_ms: z.number(),
})
export type BenchReport = z.infer<typeof BenchReport>
