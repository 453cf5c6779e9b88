/**
 * The summary of a distillation (`reward-harness distill`: `<out>/summary.json` and `--json`), read back by
 * `reward-harness report`.
 */
import { z } from 'zod'
import { DISTILL_FORMATS } from './distill-formats.ts'

/** Why a candidate pair was not kept. */
export const DROP_REASONS = ['tie', 'below_margin', 'within_noise', 'over_prompt_cap'] as const

const Count = z.number().int().nonnegative()
const Share = z.number().min(0).max(1).nullable()

/**
 * What a distillation did. Counts add up: pairs.candidates = kept + every dropped count; kept = train + held_out;
 * judgements.requested = succeeded + failed.
 * @example DistillSummary.parse(JSON.parse(readFileSync('out/distill/summary.json', 'utf8')))
 */
export const DistillSummary = z.object({
  kind: z.literal('distill_summary'),
  run_id: z.string().nullable(),
  source: z.string(),
  settings: z.object({
    repeats: Count,
    judges: z.array(z.string()),
    z: z.number(),
    min_margin: z.number(),
    pairs_per_prompt: Count,
    held_out: z.number(),
    seed: z.number(),
    conversational: z.boolean(),
  }),
  bound: z.string(),
  rollouts: z.object({ archived: Count, distinct: Count, merged_duplicates: Count }),
  prompts: z.object({
    seen: Count,
    single_response: Count,
    judged: Count,
    paired: Count,
    train: Count,
    held_out: Count,
  }),
  judgements: z.object({
    requested: Count,
    succeeded: Count,
    failed: Count,
    llm_calls: Count,
    cache_hits: Count,
    failures: z.array(z.string()),
  }),
  pairs: z.object({
    candidates: Count,
    kept: Count,
    train: Count,
    held_out: Count,
    dropped: z.object(
      Object.fromEntries(DROP_REASONS.map((reason) => [reason, Count])) as Record<
        (typeof DROP_REASONS)[number],
        typeof Count
      >,
    ),
  }),
  agreement: z.object({ mean_spread: z.number().nullable(), pairwise: Share, online: Share }),
  outputs: z.array(
    z.object({ format: z.enum(DISTILL_FORMATS), split: z.enum(['train', 'held_out']), file: z.string(), rows: Count }),
  ),
})
export type DistillSummary = z.infer<typeof DistillSummary>
