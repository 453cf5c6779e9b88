/** The text form of a distillation's summary (its schema is src/schemas/distill-summary.ts) and its noise bound. */
import { DROP_REASONS } from '../../src/schemas/distill-summary.ts'
import type { DistillSummary } from '../../src/schemas/index.ts'

export type { DistillSummary } from '../../src/schemas/index.ts'

/** The rule a kept pair satisfies, as the summary states it. */
export const NOISE_BOUND =
  'keep a pair when mean_c − mean_r ≥ min_margin and mean_c − mean_r > z·√(var_c/n_c + var_r/n_r)'

/**
 * The summary as text: counts that add up, the bound, agreement, and the files written.
 * @example console.log(formatDistillSummary(summary))
 */
export function formatDistillSummary(summary: DistillSummary): string {
  const pct = (value: number | null) => (value === null ? 'n/a' : `${(value * 100).toFixed(1)}%`)
  const dropped = DROP_REASONS.map((reason) => `${reason} ${summary.pairs.dropped[reason]}`).join(', ')
  return [
    `distilled ${summary.source}${summary.run_id ? ` (run ${summary.run_id})` : ''}`,
    `rollouts   ${summary.rollouts.archived} archived, ${summary.rollouts.distinct} distinct ` +
      `(${summary.rollouts.merged_duplicates} identical merged)`,
    `prompts    ${summary.prompts.seen} seen, ${summary.prompts.single_response} with a single response, ` +
      `${summary.prompts.judged} judged, ${summary.prompts.paired} paired (${summary.prompts.train} train, ` +
      `${summary.prompts.held_out} held out)`,
    `judgements ${summary.judgements.succeeded}/${summary.judgements.requested} (${summary.settings.repeats} × ` +
      `${summary.settings.judges.join(', ')}), ${summary.judgements.failed} failed; ${summary.judgements.llm_calls} ` +
      `LLM calls, ${summary.judgements.cache_hits} from the cache`,
    `pairs      ${summary.pairs.candidates} candidates: ${summary.pairs.kept} kept (${summary.pairs.train} train, ` +
      `${summary.pairs.held_out} held out); dropped ${dropped}`,
    `bound      ${summary.bound} (z ${summary.settings.z}, min_margin ${summary.settings.min_margin}, ≤ ` +
      `${summary.settings.pairs_per_prompt} pairs per prompt)`,
    `agreement  mean spread ` +
      `${summary.agreement.mean_spread === null ? 'n/a' : summary.agreement.mean_spread.toFixed(4)}, repeats agree ` +
      `${pct(summary.agreement.pairwise)}, online scores agree with kept pairs ${pct(summary.agreement.online)}`,
    ...summary.outputs.map((output) => `wrote      ${output.file} (${output.rows} rows)`),
  ].join('\n')
}
