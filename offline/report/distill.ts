/**
 * The report of a distillation summary: headline counts, where the candidate pairs went (kept or dropped, by reason),
 * how well the repeated judgements agreed, the settings and bound, and the files written.
 */
import { barChart } from '../../src/charts/index.ts'
import { DROP_REASONS } from '../../src/schemas/distill-summary.ts'
import type { DistillSummary } from '../../src/schemas/index.ts'
import { html } from 'hono/html'
import { CHART_SIZE, figure, keyValues, type Markup, num, pct, type ReportBody, table } from './parts.ts'

/**
 * The report body of a `summary.json` written by `reward-harness distill`.
 * @example distillReport(DistillSummary.parse(json)).tiles[0] // { label: 'pairs kept', value: 12, … }
 */
export function distillReport(summary: DistillSummary): ReportBody {
  const { pairs, prompts, judgements, agreement, rollouts, settings } = summary
  return {
    kind: 'distill',
    label: 'distill summary',
    title: `Distilled RM data${summary.run_id ? ` of run ${summary.run_id}` : ''}`,
    subtitle: summary.source,
    tiles: [
      { label: 'pairs kept', value: pairs.kept, hint: `${pairs.train} train · ${pairs.held_out} held out` },
      { label: 'candidates', value: pairs.candidates, hint: `${pairs.candidates - pairs.kept} dropped` },
      { label: 'prompts paired', value: prompts.paired, hint: `${prompts.train} train · ${prompts.held_out} held out` },
      {
        label: 'repeats agree',
        value: pct(agreement.pairwise),
        hint: `mean spread ${agreement.mean_spread === null ? '—' : num(agreement.mean_spread)}`,
      },
      { label: 'LLM calls', value: judgements.llm_calls, hint: `${judgements.cache_hits} from the cache` },
    ],
    sections: [
      {
        id: 'pairs',
        title: 'Pairs',
        body: pairsSection(pairs),
      },
      {
        id: 'data',
        title: 'Rollouts, prompts and judgements',
        body: keyValues([
          [
            'rollouts',
            `${rollouts.archived} archived, ${rollouts.distinct} distinct (${rollouts.merged_duplicates} identical ` +
              `merged)`,
          ],
          [
            'prompts',
            `${prompts.seen} seen, ${prompts.single_response} with one response, ${prompts.judged} judged, ` +
              `${prompts.paired} paired`,
          ],
          ['judgements', `${judgements.succeeded} of ${judgements.requested} (${judgements.failed} failed)`],
          ['online scores agree with kept pairs', pct(agreement.online)],
          ...judgements.failures.map((failure): [string, string] => ['failure', failure]),
        ]),
      },
      {
        id: 'settings',
        title: 'Settings',
        body: keyValues([
          ['judges × repeats', `${settings.judges.join(', ')} × ${settings.repeats}`],
          ['bound', html`<code>${summary.bound}</code> (z ${settings.z}, min_margin ${settings.min_margin})`],
          ['pairs per prompt', String(settings.pairs_per_prompt)],
          ['held out', `${pct(settings.held_out)} of prompts, seed ${settings.seed}`],
          ['rows', settings.conversational ? 'conversational' : 'plain text'],
        ]),
      },
      {
        id: 'outputs',
        title: 'Files',
        body: table({
          headers: ['format', 'split', 'rows', 'file'],
          numeric: [2],
          rows: summary.outputs.map((output) => [
            output.format,
            output.split,
            output.rows,
            html`<code>${output.file}</code>`,
          ]),
        }),
      },
    ],
    charts: 1,
  }
}

/** Where the candidate pairs went: a bar per outcome, and the same counts as a table. */
function pairsSection(pairs: DistillSummary['pairs']): Markup {
  const chart = barChart({
    ...CHART_SIZE,
    title: 'Candidate pairs: kept and dropped by reason',
    yLabel: 'pairs',
    bars: [
      { label: 'kept', value: pairs.kept },
      ...DROP_REASONS.map((reason) => ({ label: reason, value: pairs.dropped[reason] })),
    ],
  })
  return html`${figure(chart, 'Every candidate pair is kept or dropped for exactly one reason.')}${table({
    headers: ['', 'pairs'],
    numeric: [1],
    rows: [
      ['candidates', pairs.candidates],
      ['kept', pairs.kept],
      ...DROP_REASONS.map((reason) => [html`dropped: <code>${reason}</code>`, pairs.dropped[reason]]),
    ],
  })}`
}
