/** The summary of a distillation (`<out>/summary.json`, `--json`), its schema for readers, and its text form. */
import { z } from 'zod'
import { DISTILL_FORMATS, DROP_REASONS } from '../../src/distill/index.ts'

/** The rule a kept pair satisfies, as the summary states it. */
export const NOISE_BOUND =
  'keep a pair when mean_c − mean_r ≥ min_margin and mean_c − mean_r > z·√(var_c/n_c + var_r/n_r)'

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

/**
 * The summary as text: counts that add up, the bound, agreement, and the files written.
 * @example console.log(formatDistillSummary(summary))
 */
export function formatDistillSummary(summary: DistillSummary): string {
  const pct = (value: number | null) => (value === null ? 'n/a' : `${(value * 100).toFixed(1)}%`)
  const dropped = DROP_REASONS.map((reason) => `${reason} ${summary.pairs.dropped[reason]}`).join(', ')
  return [
    `distilled ${summary.source}${summary.run_id ? ` (run ${summary.run_id})` : ''}`,
    `rollouts   ${summary.rollouts.archived} archived, ${summary.rollouts.distinct} distinct (${summary.rollouts.merged_duplicates} identical merged)`,
    `prompts    ${summary.prompts.seen} seen, ${summary.prompts.single_response} with a single response, ${summary.prompts.judged} judged, ${summary.prompts.paired} paired (${summary.prompts.train} train, ${summary.prompts.held_out} held out)`,
    `judgements ${summary.judgements.succeeded}/${summary.judgements.requested} (${summary.settings.repeats} × ${summary.settings.judges.join(', ')}), ${summary.judgements.failed} failed; ${summary.judgements.llm_calls} LLM calls, ${summary.judgements.cache_hits} from the cache`,
    `pairs      ${summary.pairs.candidates} candidates: ${summary.pairs.kept} kept (${summary.pairs.train} train, ${summary.pairs.held_out} held out); dropped ${dropped}`,
    `bound      ${summary.bound} (z ${summary.settings.z}, min_margin ${summary.settings.min_margin}, ≤ ${summary.settings.pairs_per_prompt} pairs per prompt)`,
    `agreement  mean spread ${summary.agreement.mean_spread === null ? 'n/a' : summary.agreement.mean_spread.toFixed(4)}, repeats agree ${pct(summary.agreement.pairwise)}, online scores agree with kept pairs ${pct(summary.agreement.online)}`,
    ...summary.outputs.map((output) => `wrote      ${output.file} (${output.rows} rows)`),
  ].join('\n')
}
