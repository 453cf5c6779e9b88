/**
 * The report of an evolution log: validation accuracy per iteration with the kept and rolled-back changes
 * marked, the change log, and the final library's entries (read from the run's checkpoints when present).
 */
import { lineChart } from '../../src/charts/index.ts'
import { entryList } from '../../src/library/index.ts'
import type { LoadedLibrary } from './detect.ts'
import { html } from 'hono/html'
import { CHART_SIZE, figure, keyValues, num, pct, type ReportBody, type Markup, type Tile, table } from './parts.ts'
import type { EvolutionLogEntry } from '../../src/schemas/index.ts'

/** Marker colours: green for kept, vermillion for rolled back (Okabe–Ito, readable with colour-vision deficiencies). */
const KEPT_COLOUR = '#009E73'
const TRAIN_COLOUR = '#9CA3AF'
const VALIDATION_COLOUR = '#0072B2'
const BEST_COLOUR = '#E69F00'
const ROLLED_BACK_COLOUR = '#D55E00'

const DECISION_LABELS: Record<string, string> = {
  baseline: 'baseline',
  kept: 'kept',
  rolled_back: 'rolled back',
  skipped: 'skipped',
  rejected: 'rejected',
}

const decisionBadge = (decision: string) =>
  html`<span class="badge ${decision}">${DECISION_LABELS[decision] ?? decision}</span>`

/**
 * The chart series of an evolution: the library's validation accuracy after each iteration, the best so far,
 * train accuracy, and the candidate changes' validation accuracy as kept / rolled-back markers.
 * @example evolutionSeries(log).find((series) => series.name === 'rolled back')?.points
 */
function evolutionSeries(log: EvolutionLogEntry[]) {
  const at = (pick: (line: EvolutionLogEntry) => number | null | undefined) =>
    log.flatMap((line) => {
      const y = pick(line)
      return typeof y === 'number' ? [{ x: line.iteration, y }] : []
    })
  const marked = (decision: string) => at((line) => (line.decision === decision ? line.val_accuracy : null))
  // Drawn in this order: train under validation, the dashed best-so-far over it (they are often equal).
  return [
    { name: 'train', color: TRAIN_COLOUR, points: at((line) => line.train_accuracy) },
    { name: 'validation (library in use)', color: VALIDATION_COLOUR, points: at((line) => line.state_val_accuracy) },
    { name: 'best validation so far', color: BEST_COLOUR, dashed: true, points: at((line) => line.best_val_accuracy) },
    { name: 'kept change', mode: 'points' as const, color: KEPT_COLOUR, points: marked('kept') },
    { name: 'rolled back', mode: 'points' as const, color: ROLLED_BACK_COLOUR, points: marked('rolled_back') },
  ].filter((series) => series.mode !== 'points' || series.points.length > 0) // no legend entry for a marker never drawn
}

/**
 * The sections of an evolution report.
 * @example const body = evolveReport(log, finalLibrary, bestLibrary)
 */
export function evolveReport(
  log: EvolutionLogEntry[],
  finalLibrary: LoadedLibrary | null,
  bestLibrary: LoadedLibrary | null,
): ReportBody {
  const last = log.at(-1)!
  const count = (decision: string) => log.filter((line) => line.decision === decision).length
  const iterations = log.length - count('baseline')
  const settings = last.settings ?? {}
  const chart = lineChart({
    title: 'Validation accuracy per iteration',
    ...CHART_SIZE,
    xLabel: 'iteration',
    yLabel: 'accuracy',
    yDomain: [0, 1],
    series: evolutionSeries(log),
  })

  const changeLog = changeLogTable(log)

  const sections = [
    {
      id: 'accuracy',
      title: 'Validation accuracy per iteration',
      body: figure(
        chart,
        'Lines: the validation accuracy of the library in use after each iteration, the best so far, and train ' +
          "accuracy. Markers: a proposed change's validation accuracy, green when kept, vermillion when rolled back " +
          `(a change is kept when it reaches best − ${num(settings.explore_margin as number | undefined)}).`,
      ),
    },
    { id: 'changes', title: `Change log (iterations ${log[0]!.iteration}–${last.iteration})`, body: changeLog },
    ...(log.some((line) => line.usage) ? [{ id: 'calls', title: 'Calls', body: callsSection(log) }] : []),
    {
      id: 'library',
      title: `Final library (${last.entries.length} entr${last.entries.length === 1 ? 'y' : 'ies'})`,
      body: librarySection(last, finalLibrary, bestLibrary),
    },
    {
      id: 'settings',
      title: 'Run settings',
      body: settingsFacts(log, settings),
    },
  ]
  return {
    kind: 'evolve',
    label: 'evolution log',
    title: 'Judge library evolution',
    subtitle:
      `${iterations} iteration${iterations === 1 ? '' : 's'} after the baseline, ` +
      `best at iteration ${last.best_iteration}`,
    tiles: evolveTiles(log),
    sections,
    charts: 1,
  }
}

/** One row per logged iteration: the decision, the change and why, accuracies, failures and library size. */
function changeLogTable(log: EvolutionLogEntry[]): Markup {
  const rows = log.map((line) => [
    line.iteration,
    decisionBadge(line.decision),
    line.change ? html`<code>${line.change.key}</code>` : html`<span class="muted">—</span>`,
    html`${line.change?.rationale ?? ''}${noteOf(line)}${pruningOf(line)}`,
    pct(line.train_accuracy),
    pct(line.val_accuracy),
    pct(line.best_val_accuracy),
    html`${line.failures ? `${line.failures.train} / ${line.failures.val}` : '—'}${inconsistencyOf(line)}`,
    line.entries.length,
  ])
  return table({
    headers: ['iteration', 'decision', 'change', 'rationale / note', 'train', 'val', 'best val', 'failures', 'entries'],
    numeric: [0, 4, 5, 6, 7, 8],
    rows,
    className: 'changes',
    caption:
      'val: the proposed library’s validation accuracy; failures: judgments that failed (train / val), and items ' +
      'whose two orders disagreed (inconsistent); neither is ever counted as a tie.',
  })
}

/** The iteration's note, unless it only repeats the change's rationale. */
function noteOf(line: EvolutionLogEntry): Markup | string {
  const repeats = line.note?.endsWith(line.change?.rationale ?? '\u0000')
  return line.note && !repeats ? html`<span class="ci">${line.note}</span>` : ''
}

/** What a pruning pass removed and what became of it. */
function pruningOf(line: EvolutionLogEntry): Markup | string {
  if (!line.pruned) return ''
  const { removed, decision, val_accuracy } = line.pruned
  const what = removed.length ? removed.join(', ') : 'nothing removable'
  const outcome = `${DECISION_LABELS[decision] ?? decision} (val ${pct(val_accuracy)})`
  return html`<span class="ci">pruning: ${what} → ${outcome}</span>`
}

/** Items whose two presentation orders disagreed (train / val), when there were any. */
function inconsistencyOf(line: EvolutionLogEntry): Markup | string {
  const { inconsistent } = line
  if (!inconsistent || inconsistent.train + inconsistent.val === 0) return ''
  return html`<span class="ci">${inconsistent.train} / ${inconsistent.val} inconsistent</span>`
}

/** The run's settings as a key-value list. */
function settingsFacts(log: EvolutionLogEntry[], settings: Record<string, unknown>): Markup {
  const last = log.at(-1)!
  return keyValues([
    ['seed', String(settings.seed ?? '—')],
    ['validation share', typeof settings.val_fraction === 'number' ? pct(settings.val_fraction) : '—'],
    ['explore margin', num(settings.explore_margin as number | undefined)],
    ['pruning', settings.prune_every ? `every ${String(settings.prune_every)} iterations` : 'off'],
    [
      'presentation orders',
      settings.orders === undefined ? '—' : settings.orders === 'both' ? 'both (A/B and B/A)' : String(settings.orders),
    ],
    [
      'items (train with swaps / validation)',
      `${String(settings.train ?? '—')} / ${String(settings.validation ?? '—')}`,
    ],
    ['dataset sha256', html`<code>${String(settings.dataset_sha256 ?? '—')}</code>`],
    ['first → last line (UTC)', `${log[0]!.timestamp ?? '—'} → ${last.timestamp ?? '—'}`],
  ])
}

/** The headline numbers: best and baseline validation accuracy, decisions, final size. */
function evolveTiles(log: EvolutionLogEntry[]): Tile[] {
  const last = log.at(-1)!
  const count = (decision: string) => log.filter((line) => line.decision === decision).length
  return [
    {
      label: 'best validation accuracy',
      value: pct(last.best_val_accuracy),
      hint: `iteration ${last.best_iteration}`,
    },
    {
      label: 'baseline validation',
      value: pct(log.find((line) => line.decision === 'baseline')?.val_accuracy ?? log[0]!.state_val_accuracy),
    },
    {
      label: 'kept / rolled back',
      value: `${count('kept')} / ${count('rolled_back')}`,
      hint: `${count('skipped')} skipped${count('rejected') ? `, ${count('rejected')} rejected` : ''}`,
    },
    { label: 'entries in the final library', value: last.entries.length },
  ]
}

function librarySection(
  last: EvolutionLogEntry,
  finalLibrary: LoadedLibrary | null,
  bestLibrary: LoadedLibrary | null,
): Markup {
  if (last.entries.length === 0) return html`<p class="empty">The library ended empty.</p>`
  const entries = finalLibrary ? entryList(finalLibrary.library) : []
  const cards = finalLibrary ? entries.map(entryCard) : html`<p class="muted">${namesOnly(last)}</p>`
  const where = finalLibrary ? html`<p class="muted">From <code>${finalLibrary.dir}</code>.</p>` : ''
  const best =
    bestLibrary && last.best_library_sha256 !== undefined && last.best_library_sha256 !== last.library_sha256
      ? html`<p class="muted">The best validated library (iteration ${last.best_iteration}) is in <code>${
          bestLibrary.dir
        }</code>: ${Object.keys(bestLibrary.library.entries).join(', ') || 'empty'}.</p>`
      : ''
  return html`${where}${cards}${best}`
}

/** The final entries by name, when the library itself is not beside the log. */
function namesOnly(last: EvolutionLogEntry): string {
  return (
    `Entries: ${last.entries.join(', ')}. (No checkpoints/iter-${last.iteration} with the content hash the log ` +
    'recorded is next to the log, so only their names are known.)'
  )
}

/** One library entry as a card: name, kind, description, when to use it, and its body folded away. */
function entryCard(entry: ReturnType<typeof entryList>[number]): Markup {
  const heading = html`<h3><code>${entry.name}</code> <span class="badge baseline">${entry.kind}</span></h3>`
  const whenToUse = entry.when_to_use ? html`<p class="muted">When to use: ${entry.when_to_use}</p>` : ''
  const body = html`<details><summary>${entry.kind === 'tool' ? 'System prompt' : 'Rubric'}</summary><pre>${
    entry.body
  }</pre></details>`
  return html`<div class="card">${heading}<p>${entry.description}</p>${whenToUse}${body}</div>`
}

const USAGE_COLUMNS = [
  ['calls', 'calls'],
  ['ok', 'ok'],
  ['failures', 'failed'],
  ['invalid_replies', 'unusable replies'],
  ['cached', 'from cache'],
  ['prompt_tokens', 'prompt tokens'],
  ['completion_tokens', 'completion tokens'],
] as const

/** Model calls per role summed over the logged iterations (the baseline included). */
function callsSection(log: EvolutionLogEntry[]): Markup {
  const totals = new Map<string, Record<string, number>>()
  for (const line of log) {
    for (const [role, counters] of Object.entries(line.usage ?? {})) {
      const sum = totals.get(role) ?? {}
      for (const [key] of USAGE_COLUMNS)
        if (typeof counters[key] === 'number') sum[key] = (sum[key] ?? 0) + (counters[key] as number)
      totals.set(role, sum)
    }
  }
  const roles = [...totals.keys()].filter((role) => role !== 'total')
  const row = (name: Markup | string, sum: Record<string, number> | undefined) => [
    name,
    ...USAGE_COLUMNS.map(([key]) => num(sum?.[key])),
  ]
  const note = 'Summed over the logged iterations. A reply from the cache costs no call and no tokens.'
  return html`<p class="muted">${note}</p>${table({
    headers: ['role', ...USAGE_COLUMNS.map(([, label]) => label)],
    numeric: USAGE_COLUMNS.map((_, index) => index + 1),
    rows: [
      ...roles.map((role) => row(role.replaceAll('_', ' '), totals.get(role))),
      ...(totals.has('total') ? [row(html`<strong>total</strong>`, totals.get('total'))] : []),
    ],
  })}`
}
