/**
 * The report of bench results: an accuracy table with 95% intervals per subset (the groups of one result, or
 * one result file per subset), bar charts with interval whiskers, the score distribution, and the scorer's
 * failures apart from the accuracies (a failure is never counted as a tie or a wrong answer).
 */
import { basename, extname } from 'node:path'
import { barChart, histogram } from '../../src/charts/index.ts'
import { html } from 'hono/html'
import { CHART_SIZE, figure, keyValues, num, pct, type ReportBody, type Markup, table } from './parts.ts'
import type { BenchAccuracy, BenchMetrics, BenchReport } from '../../src/schemas/index.ts'

type MetricKey = 'ab' | 'ba' | 'swap_consistent' | 'kway' | 'pairs_within_kway' | 'tail'

/** Every accuracy a bench result may hold, in table order. */
const METRICS: Array<{
  key: MetricKey
  label: string
  pick: (metrics: BenchMetrics) => BenchAccuracy | null | undefined
}> = [
  { key: 'ab', label: 'pairwise A/B', pick: (metrics) => metrics.pairwise?.ab },
  { key: 'ba', label: 'pairwise B/A', pick: (metrics) => metrics.pairwise?.ba },
  { key: 'swap_consistent', label: 'swap-consistent', pick: (metrics) => metrics.pairwise?.swap_consistent },
  { key: 'kway', label: 'K-way', pick: (metrics) => metrics.kway },
  { key: 'pairs_within_kway', label: 'pairs in K-way', pick: (metrics) => metrics.pairs_within_kway },
  { key: 'tail', label: 'tail', pick: (metrics) => metrics.tail },
]

/**
 * The accuracy a subset is summed up by: swap-consistent for pairs (the strictest), else K-way, else the others.
 * @example headline(metrics) // { label: 'swap-consistent', accuracy: { accuracy: 0.42, ci95: [0.33, 0.52], … } }
 */
function headline(metrics: BenchMetrics): { label: string; accuracy: BenchAccuracy } | null {
  for (const key of ['swap_consistent', 'kway', 'pairs_within_kway', 'tail', 'ab'] as const) {
    const metric = METRICS.find((entry) => entry.key === key)!
    const accuracy = metric.pick(metrics)
    if (accuracy && accuracy.accuracy !== null) return { label: metric.label, accuracy }
  }
  return null
}

/** One row of the accuracy table. */
interface SubsetRow {
  label: string
  metrics: BenchMetrics
  /** A whole result (its overall line) rather than one of its groups. */
  total: boolean
  /** A whole result whose groups follow as rows of their own. */
  split: boolean
}

/**
 * The subsets of the results: with one result, its overall line and each group (when there are several);
 * with several (e.g. one per LLMBar subset file), one subset per file, split by group when a file has several.
 * @example subsetRows([{ file: 'natural.json', result }]).map((row) => row.label) // ['overall']
 */
function subsetRows(results: Array<{ file: string; result: BenchReport }>): SubsetRow[] {
  const rows: SubsetRow[] = []
  for (const { file, result } of results) {
    const name =
      results.length > 1 ? basename(result.dataset.path || file, extname(result.dataset.path || file)) : 'overall'
    const groups = Object.entries(result.groups)
    rows.push({ label: name, metrics: result.overall, total: true, split: groups.length > 1 })
    if (groups.length > 1)
      for (const [group, metrics] of groups)
        rows.push({ label: results.length > 1 ? `${name} / ${group}` : group, metrics, total: false, split: false })
  }
  return rows
}

const interval = (accuracy: BenchAccuracy) => {
  const { ci95, bootstrap95 } = accuracy
  const ci = ci95 ? html`<span class="ci">95% CI ${pct(ci95[0])}–${pct(ci95[1])}</span>` : ''
  const bootstrap = bootstrap95
    ? html`<span class="ci">bootstrap ${pct(bootstrap95[0])}–${pct(bootstrap95[1])}</span>`
    : ''
  return html`${ci}${bootstrap}<span class="ci">n=${accuracy.n}${accuracy.ties ? `, ${accuracy.ties} ties` : ''}</span>`
}

const accuracyCell = (accuracy: BenchAccuracy | null | undefined): Markup | string =>
  !accuracy
    ? '—'
    : accuracy.accuracy === null
      ? html`—<span class="ci">n=0</span>`
      : html`<strong>${pct(accuracy.accuracy)}</strong>${interval(accuracy)}`

/** A bar with its Wilson interval as whiskers. */
const barOf = (label: string, accuracy: BenchAccuracy) => ({
  label,
  value: accuracy.accuracy ?? Number.NaN,
  ...(accuracy.ci95 ? { low: accuracy.ci95[0], high: accuracy.ci95[1] } : {}),
})

/**
 * The sections of a bench report.
 * @example const body = benchReport([{ file: 'bench.json', result }])
 */
export function benchReport(results: Array<{ file: string; result: BenchReport }>): ReportBody {
  const rows = subsetRows(results)
  // The finest subsets: a result's groups when it has several, else the result itself.
  const leaves = rows.filter((row) => !row.split)
  const shown = METRICS.filter((metric) => rows.some((row) => metric.pick(row.metrics)))
  const charts = benchCharts(results, leaves, shown)
  const first = results[0]!.result
  const chartsBlock = charts.length
    ? html`<div class="charts">${charts.map((chart) => figure(chart.svg, chart.caption))}</div>`
    : ''
  const tiesNote =
    `Ties count ${first.ties === 'wrong' ? 'as wrong' : 'as half correct'}. ` +
    'Failures (scorer errors) are excluded from n and listed below.'

  const accuracyTable = table({
    headers: ['subset', 'items', ...shown.map((metric) => metric.label), 'failed items'],
    numeric: [1, ...shown.map((_, index) => index + 2), shown.length + 2],
    rows: rows.map((row) => [
      row.total && rows.length > 1 ? html`<strong>${row.label}</strong>` : row.label,
      row.metrics.items,
      ...shown.map((metric) => accuracyCell(metric.pick(row.metrics))),
      row.metrics.failed_items,
    ]),
  })

  const failureCount = results.reduce((sum, { result }) => sum + result.failures.count, 0)
  const failedItems = results.reduce((sum, { result }) => sum + result.failures.items, 0)
  const scorers = [...new Set(results.map(({ result }) => result.scorer))]
  const datasets = results.map(({ result, file }) => basename(result.dataset.path || file))
  const top = results.length === 1 ? headline(first.overall) : null
  const items = results.reduce((sum, { result }) => sum + result.dataset.items, 0)

  return {
    kind: 'bench',
    label: 'bench result',
    title: `Benchmark: ${scorers.join(', ')} on ${results.length === 1 ? datasets[0] : `${results.length} subsets`}`,
    subtitle:
      results.length > 1
        ? datasets.join(' · ')
        : `${first.dataset.shape ?? 'dataset'} · ${first.dataset.items} items, ${first.dataset.candidates} candidates`,
    tiles: [
      { label: 'items', value: num(items), hint: `${results.length} result${results.length === 1 ? '' : 's'}` },
      top
        ? {
            label: `${top.label} accuracy`,
            value: pct(top.accuracy.accuracy),
            hint: top.accuracy.ci95 ? `95% CI ${pct(top.accuracy.ci95[0])}–${pct(top.accuracy.ci95[1])}` : undefined,
          }
        : { label: 'subsets', value: leaves.length || rows.length },
      { label: 'scorer', value: scorers.join(', '), hint: first.model },
      { label: 'failures', value: failureCount, hint: `in ${failedItems} item${failedItems === 1 ? '' : 's'}` },
    ],
    sections: [
      {
        id: 'accuracy',
        title: 'Accuracy with 95% intervals',
        body: html`${chartsBlock}<h3>By subset</h3>${accuracyTable}<p class="muted">${tiesNote}</p>`,
      },
      { id: 'failures', title: `Failures (${failureCount})`, body: failuresSection(results) },
      { id: 'settings', title: 'Run settings', body: settingsSection(results) },
    ],
    charts: charts.length,
  }
}

/** The charts of a bench report: accuracy by metric (one result), by subset (several), and the scores given. */
function benchCharts(
  results: Array<{ file: string; result: BenchReport }>,
  leaves: SubsetRow[],
  shown: typeof METRICS,
): Array<{ svg: string; caption: string }> {
  const charts: Array<{ svg: string; caption: string }> = []

  if (results.length === 1) {
    const overall = results[0]!.result.overall
    const bars = shown.flatMap((metric) => {
      const accuracy = metric.pick(overall)
      return accuracy ? [barOf(metric.label, accuracy)] : []
    })
    charts.push({
      svg: barChart({ title: 'Accuracy by metric', ...CHART_SIZE, yLabel: 'accuracy', yDomain: [0, 1], bars }),
      caption:
        'Overall accuracy of each metric; whiskers are Wilson 95% intervals. Ties count as the result says; failures ' +
        'are excluded.',
    })
  }
  if (leaves.length > 1) {
    const bars = leaves.flatMap((row) => {
      const best = headline(row.metrics)
      return best ? [barOf(row.label, best.accuracy)] : []
    })
    const labels = [...new Set(leaves.map((row) => headline(row.metrics)?.label).filter(Boolean))]
    charts.push({
      svg: barChart({
        ...CHART_SIZE,
        title: `${labels.length === 1 ? `${capitalised(labels[0]!)} accuracy` : 'Headline accuracy'} by subset`,
        yLabel: 'accuracy',
        yDomain: [0, 1],
        bars,
      }),
      caption: `One bar per subset (${labels.join(', ') || 'no accuracy'}); whiskers are Wilson 95% intervals.`,
    })
  }
  const scores = results.flatMap(({ result }) =>
    (result.scores ?? []).flatMap((item) =>
      item.candidates.flatMap((candidate) => (candidate.score === null ? [] : [candidate.score])),
    ),
  )
  if (scores.length > 0) {
    const unit = scores.every((score) => score >= 0 && score <= 1)
    charts.push({
      svg: histogram({
        title: 'Scores given',
        ...CHART_SIZE,
        xLabel: 'score',
        yLabel: 'candidates',
        values: scores,
        bins: 20,
        ...(unit ? { domain: [0, 1] as [number, number] } : {}),
      }),
      caption:
        'Every candidate’s score from the scorer (failures left out). A scorer that gives many equal scores causes ' +
        'ties.',
    })
  }
  return charts
}

function failuresSection(results: Array<{ file: string; result: BenchReport }>): Markup {
  const examples = results.flatMap(({ file, result }) =>
    result.failures.examples.map((failure) => ({ subset: basename(result.dataset.path || file), ...failure })),
  )
  if (examples.length === 0) return html`<p class="empty">No scorer failures: every candidate got a score.</p>`
  const total = results.reduce((sum, { result }) => sum + result.failures.count, 0)
  const listed = examples.length < total ? `the first ${examples.length} are listed` : 'all are listed'
  const intro =
    `${total} candidate${total === 1 ? '' : 's'} could not be scored; ${listed}. ` +
    'Their comparisons are left out of every accuracy above, not counted as ties.'
  return html`<div class="card failures"><p>${intro}</p>${table({
    headers: [...(results.length > 1 ? ['subset'] : []), 'prompt', 'candidate', 'error'],
    rows: examples.map((failure) => [
      ...(results.length > 1 ? [failure.subset] : []),
      html`<code>${failure.prompt_id}</code>`,
      html`<code>${failure.candidate_id}</code>`,
      failure.error,
    ]),
  })}</div>`
}

function settingsSection(results: Array<{ file: string; result: BenchReport }>): Markup {
  if (results.length === 1) {
    const { file, result } = results[0]!
    return keyValues([
      ['result file', html`<code>${file}</code>`],
      ['dataset', html`<code>${result.dataset.path}</code> · ${result.dataset.shape ?? '—'}`],
      ['dataset sha256', html`<code>${result.dataset.sha256 ?? '—'}</code>`],
      ['scorer · model', `${result.scorer} · ${result.model ?? '—'}`],
      ['seed', String(result.seed ?? '—')],
      ['ties', result.ties === 'wrong' ? 'count as wrong' : 'count as half correct'],
      ['bootstrap resamples', result.bootstrap ? num(result.bootstrap) : 'none'],
      ['elapsed', result.elapsed_ms !== undefined ? `${(result.elapsed_ms / 1000).toFixed(1)} s` : '—'],
    ])
  }
  return table({
    headers: ['result file · dataset', 'items', 'candidates', 'scorer · model', 'seed', 'ties', 'bootstrap', 'elapsed'],
    numeric: [1, 2, 4, 6],
    rows: results.map(({ file, result }) => [
      html`<code>${basename(file)}</code><span class="ci path">${result.dataset.path}</span>`,
      result.dataset.items,
      result.dataset.candidates,
      html`${result.scorer}<span class="ci">${result.model ?? '—'}</span>`,
      String(result.seed ?? '—'),
      result.ties ?? '—',
      result.bootstrap ? num(result.bootstrap) : 'none',
      result.elapsed_ms !== undefined ? `${(result.elapsed_ms / 1000).toFixed(1)} s` : '—',
    ]),
  })
}

/** `word` with its first letter in upper case. */
function capitalised(word: string): string {
  return `${word[0]!.toUpperCase()}${word.slice(1)}`
}
