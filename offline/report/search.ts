/**
 * The report of a search output: objective per generation (best and mean over prompts), the best rubric of
 * each prompt with its criteria, the run settings from the embedded run manifest, and the call counts.
 */
import { barChart, histogram, lineChart } from '../../src/charts/index.ts'
import { html } from 'hono/html'
import { CHART_SIZE, figure, keyValues, type Markup, num, type ReportBody, type Tile, table } from './parts.ts'
import type { SearchOutputFile } from '../../src/schemas/index.ts'
import { mean as meanOf } from '../../src/stats/index.ts'

/** Per-prompt lines are drawn up to this many prompts; beyond it they would be a tangle. */
const MAX_PROMPT_LINES = 8
/** Final objectives are bars up to this many prompts, a histogram beyond. */
const MAX_PROMPT_BARS = 24
/** Rubrics shown expanded; the rest are collapsed. */
const OPEN_RUBRICS = 6

const NO_MANIFEST =
  'This output has no run manifest (it was not written by reward-harness search), so the run settings are unknown.'

/**
 * Objective per generation over prompts: the best prompt's and the mean. A prompt that stopped early
 * (distinguished or stagnant) keeps its last value in later generations, so the mean stays over all prompts.
 * @example objectiveByGeneration([[0.5, 0.7], [0.4]]) // { best: [{x:0,y:0.5},{x:1,y:0.7}], mean:
 *   [{x:0,y:0.45},{x:1,y:0.55}] }
 * @internal
 */
export function objectiveByGeneration(histories: number[][]): {
  best: Array<{ x: number; y: number }>
  mean: Array<{ x: number; y: number }>
} {
  const present = histories.filter((history) => history.length > 0)
  const generations = Math.max(0, ...present.map((history) => history.length))
  const best: Array<{ x: number; y: number }> = []
  const mean: Array<{ x: number; y: number }> = []
  for (let generation = 0; generation < generations; generation++) {
    const values = present.map((history) => history[Math.min(generation, history.length - 1)]!)
    best.push({ x: generation, y: Math.max(...values) })
    mean.push({ x: generation, y: meanOf(values) ?? 0 })
  }
  return { best, mean }
}

const get = (value: unknown, ...path: string[]): unknown =>
  path.reduce<unknown>(
    (node, key) => (node && typeof node === 'object' ? (node as Record<string, unknown>)[key] : undefined),
    value,
  )
const text = (value: unknown): string =>
  value === null || value === undefined ? '—' : typeof value === 'object' ? JSON.stringify(value) : String(value)

/**
 * The sections of a search report.
 * @example const body = searchReport(output, 'best.json')
 */
export function searchReport(output: SearchOutputFile, fileName: string): ReportBody {
  const diagnostics = output.search_diagnostics ?? null
  const manifest = output.run_manifest ?? null
  const usage = output.usage ?? null
  const rubrics = output.best_rubrics
  const step = diagnostics?.mode === 'iterative' ? 'step' : 'generation'
  const datasetPath = get(manifest, 'dataset', 'path')
  const charts = objectiveCharts(rubrics, step)
  const margins = diagnostics?.margin_improvement?.per_prompt ?? {}
  const rubricCards = rubrics.map((entry, index) => rubricCard(entry, index, step, margins[entry.prompt_id]))

  const sections = [
    {
      id: 'objective',
      title: `Objective per ${step}`,
      body: html`<div class="charts">${charts.map((chart) => figure(chart.svg, chart.caption))}</div>`,
    },
    {
      id: 'rubrics',
      title: `Best rubrics (${rubrics.length})`,
      body: rubrics.length ? html`${rubricCards}` : html`<p class="empty">The output has no rubric.</p>`,
    },
    { id: 'settings', title: 'Run settings', body: settingsSection(output) },
    { id: 'calls', title: 'Calls', body: callsSection(usage) },
  ]
  return {
    kind: 'search',
    label: 'search output',
    title: `Search report: ${typeof datasetPath === 'string' ? datasetPath.split(/[\\/]/).pop() : fileName}`,
    subtitle:
      [
        diagnostics?.mode,
        diagnostics?.iteration_scope,
        get(manifest, 'backend', 'resolved') ? `${text(get(manifest, 'backend', 'resolved'))} backend` : null,
      ]
        .filter(Boolean)
        .join(' · ') || undefined,
    tiles: searchTiles(output, step),
    sections,
    charts: charts.length,
  }
}

type BestRubric = SearchOutputFile['best_rubrics'][number]
type PromptMargin = NonNullable<
  NonNullable<NonNullable<SearchOutputFile['search_diagnostics']>['margin_improvement']>['per_prompt']
>[string]

/** The objective charts: best and mean per step, one line per prompt (when few), and the final objective. */
function objectiveCharts(rubrics: BestRubric[], step: string): Array<{ svg: string; caption: string }> {
  const { best, mean } = objectiveByGeneration(rubrics.map((entry) => entry.history ?? []))
  const charts = [
    {
      svg: lineChart({
        title: `Objective per ${step}`,
        ...CHART_SIZE,
        xLabel: step,
        yLabel: 'objective',
        series: [
          { name: 'best prompt', points: best },
          { name: `mean over ${rubrics.length} prompt${rubrics.length === 1 ? '' : 's'}`, points: mean },
        ],
      }),
      caption:
        `Best rubric's objective at each ${step}: the best prompt's, and the mean over prompts (a prompt that ` +
        `stopped early keeps its last value).`,
    },
  ]
  if (rubrics.length > 1 && rubrics.length <= MAX_PROMPT_LINES)
    charts.push({
      svg: lineChart({
        title: `Objective per ${step}, by prompt`,
        ...CHART_SIZE,
        xLabel: step,
        yLabel: 'objective',
        series: rubrics.map((entry) => ({
          name: entry.prompt_id,
          points: (entry.history ?? []).map((y, x) => ({ x, y })),
        })),
      }),
      caption: `One line per prompt.`,
    })
  charts.push({ svg: finalObjectiveChart(rubrics), caption: 'The objective total of each prompt’s best rubric.' })
  return charts
}

function finalObjectiveChart(rubrics: BestRubric[]): string {
  return rubrics.length <= MAX_PROMPT_BARS
    ? barChart({
        title: 'Final objective by prompt',
        ...CHART_SIZE,
        yLabel: 'objective',
        bars: rubrics.map((entry) => ({ label: entry.prompt_id, value: entry.score })),
      })
    : histogram({
        title: 'Final objective over prompts',
        ...CHART_SIZE,
        xLabel: 'objective',
        yLabel: 'prompts',
        values: rubrics.map((entry) => entry.score),
      })
}

/** One prompt's best rubric: its numbers, then its criteria; the first few are open. */
function rubricCard(entry: BestRubric, index: number, step: string, margin: PromptMargin | undefined): Markup {
  const objective = entry.objective
  const criteria = table({
    headers: ['criterion', 'type', 'weight', 'text', 'check points'],
    numeric: [2],
    rows: entry.rubric.criteria.map((criterion) => [
      html`<code>${criterion.criterion_id}</code>`,
      criterion.criterion_type ?? '—',
      num(criterion.weight),
      criterion.text,
      criterion.check_points.length ? criterion.check_points.join(', ') : '—',
    ]),
  })
  const protocol = entry.rubric.grading_protocol
  const facts = keyValues([
    ['rubric', html`<code>${entry.rubric.rubric_id}</code>`],
    ['objective', num(entry.score)],
    ['tail accuracy (raw)', num(objective?.raw_tail_acc)],
    ['Kendall tau', num(objective?.kendall_tau)],
    ['NDCG', num(objective?.ndcg)],
    [
      'top margin (initial → final)',
      margin
        ? `${num(margin.initial_margin)} → ${num(margin.final_margin)}${margin.improved ? ' (improved)' : ''}`
        : num(objective?.signed_top_margin),
    ],
    ['best candidate', entry.best_candidate_id ? html`<code>${entry.best_candidate_id}</code>` : '—'],
    [`${step}s run`, entry.generations_run ?? '—'],
    ['stopped by', entry.stop_reason ?? '—'],
    [
      'grading',
      `grades 0–${protocol.grade_max}, ${protocol.num_votes} vote(s)${protocol.allow_na ? ', N/A allowed' : ''}`,
    ],
  ])
  const size = `objective ${num(entry.score)} · ${entry.rubric.criteria.length} criteria`
  const summary = html`<summary><strong>${entry.prompt_id}</strong> <span class="muted">${size}</span></summary>`
  const open = index < OPEN_RUBRICS ? 'open' : ''
  return html`<details class="card rubric" ${open}>${summary}${facts}${criteria}</details>`
}

/** Who ran the search, on what, with which models and code. */
function runFactsOf(manifest: NonNullable<SearchOutputFile['run_manifest']>): Markup {
  const models = get(manifest, 'backend', 'models')
  const dataset = (field: string) => get(manifest, 'dataset', field)
  const datasetSize = `${text(dataset('prompts'))} prompts, ${text(dataset('candidates'))} candidates`
  return keyValues([
    ['run', html`<code>${text(manifest.run_id)}</code> (${text(manifest.status)})`],
    ['started → finished (UTC)', `${text(manifest.created_at_utc)} → ${text(manifest.finished_at_utc)}`],
    ['dataset', html`<code>${text(dataset('path'))}</code> · ${text(dataset('shape'))} · ${datasetSize}`],
    ['dataset sha256', html`<code>${text(get(manifest, 'dataset', 'sha256'))}</code>`],
    [
      'backend',
      `${text(get(manifest, 'backend', 'resolved'))} (requested ${text(get(manifest, 'backend', 'requested'))})`,
    ],
    [
      'models',
      models && typeof models === 'object'
        ? Object.entries(models as Record<string, unknown>)
            .map(([role, model]) => `${role}: ${text(model)}`)
            .join(', ')
        : '—',
    ],
    [
      'judge',
      `${text(get(manifest, 'backend', 'judge', 'kind'))}: ${text(get(manifest, 'backend', 'judge', 'reason'))}`,
    ],
    ['seed', text(manifest.seed)],
    [
      'config hash · settings hash',
      html`<code>${text(manifest.config_hash)}</code> · <code>${text(manifest.settings_hash)}</code>`,
    ],
    [
      'code',
      get(manifest, 'code_snapshot', 'commit')
        ? html`<code>${text(get(manifest, 'code_snapshot', 'commit'))}</code>${
            get(manifest, 'code_snapshot', 'dirty') ? ' (uncommitted changes)' : ''
          }`
        : '—',
    ],
    [
      'command',
      html`<code>reward-harness ${
        (get(manifest, 'command', 'normalized_argv') as unknown[] | undefined)?.map(text).join(' ') ?? '—'
      }</code>`,
    ],
    [
      'checkpoints',
      `${text(get(manifest, 'harness', 'checkpoints_written'))} written in ` +
        `${text(get(manifest, 'harness', 'checkpoint_dir'))}`,
    ],
  ])
}

/** The headline numbers: prompts, steps run, mean objective and tau, LLM calls. */
function searchTiles(output: SearchOutputFile, step: string): Tile[] {
  const diagnostics = output.search_diagnostics ?? null
  const usage = output.usage ?? null
  const rubrics = output.best_rubrics
  const generations = diagnostics?.generations_run ?? Math.max(0, ...rubrics.map((entry) => entry.generations_run ?? 0))
  const totalCalls = get(usage, 'total', 'calls')
  const cacheHits = get(usage, 'total', 'cache_hits')
  return [
    { label: 'prompts', value: rubrics.length },
    {
      label: `${step}s run`,
      value: generations || '—',
      hint: diagnostics?.stop_reason ? `stopped by ${diagnostics.stop_reason}` : undefined,
    },
    {
      label: 'mean objective',
      value: num(diagnostics?.objective_summary?.total ?? meanOf(rubrics.map((entry) => entry.score))),
    },
    { label: 'Kendall tau (mean)', value: num(diagnostics?.objective_summary?.kendall_tau) },
    {
      label: 'LLM calls',
      value: typeof totalCalls === 'number' ? num(totalCalls) : '—',
      hint: typeof cacheHits === 'number' ? `${num(cacheHits)} cache hits` : undefined,
    },
  ]
}

function settingsSection(output: SearchOutputFile): Markup {
  const manifest = output.run_manifest
  const diagnostics = output.search_diagnostics
  const searchFacts = keyValues([
    ['mode', diagnostics?.mode ?? '—'],
    ['iteration scope', diagnostics?.iteration_scope ?? '—'],
    ['selection', diagnostics?.selection_strategy ?? '—'],
    ['adaptive mutation', diagnostics?.adaptive_mutation ?? '—'],
    ['mean population diversity', num(diagnostics?.avg_diversity)],
    [
      'prompts with a wider top margin',
      diagnostics?.margin_improvement?.global
        ? `${diagnostics.margin_improvement.global.improved_prompts} of ` +
          `${diagnostics.margin_improvement.global.total_prompts}`
        : '—',
    ],
  ])
  if (!manifest) return html`${searchFacts}<p class="empty">${NO_MANIFEST}</p>`
  const runFacts = runFactsOf(manifest)
  const config = get(manifest, 'config_snapshot')
  const configTable =
    config && typeof config === 'object'
      ? html`<details><summary>Search config (${Object.keys(config).length} settings)</summary>${settingTable(
          config,
        )}</details>`
      : ''
  const settings = get(manifest, 'settings')
  const settingsTable =
    settings && typeof settings === 'object'
      ? html`<details><summary>Role and backend settings</summary>${settingTable(settings)}</details>`
      : ''
  return html`<h3>Run</h3>${runFacts}<h3>Search</h3>${searchFacts}${configTable}${settingsTable}`
}

/** A settings object as a two-column table, one row per key. */
function settingTable(settings: object) {
  return table({
    headers: ['setting', 'value'],
    rows: Object.entries(settings as Record<string, unknown>).map(([key, value]) => [
      html`<code>${key}</code>`,
      text(value),
    ]),
  })
}

const ROLE_COLUMNS = [
  ['requests', 'requests'],
  ['cache_hits', 'cache hits'],
  ['calls', 'backend calls'],
  ['failed_calls', 'failed'],
  ['invalid_replies', 'unusable replies'],
  ['prompt_tokens', 'prompt tokens'],
  ['completion_tokens', 'completion tokens'],
] as const

function callsSection(usage: SearchOutputFile['usage']): Markup {
  if (!usage?.roles) return html`<p class="empty">This output has no usage record.</p>`
  const row = (name: Markup | string, counters: Record<string, unknown> | undefined) => [
    name,
    ...ROLE_COLUMNS.map(([key]) => num(counters?.[key] as number | undefined)),
  ]
  const roles = table({
    headers: ['role', ...ROLE_COLUMNS.map(([, label]) => label)],
    numeric: ROLE_COLUMNS.map((_, index) => index + 1),
    rows: [
      ...Object.entries(usage.roles).map(([role, counters]) => row(role, counters)),
      row(html`<strong>total</strong>`, usage.total),
    ],
  })
  const engine = usage.engine
    ? table({
        headers: ['engine counter', 'count'],
        numeric: [1],
        rows: Object.entries(usage.engine).map(([key, value]) => [key.replaceAll('_', ' '), num(value as number)]),
      })
    : ''
  const cache = usage.cache
    ? html`<p class="muted">Reply cache: ${num(usage.cache.hits as number)} hits, ${num(
        usage.cache.misses as number,
      )} misses, ${num(usage.cache.entries as number)} entries.</p>`
    : html`<p class="muted">No reply cache.</p>`
  const backend = `Backend: ${usage.backend ?? '—'}. A request answered from the reply cache costs no backend call.`
  return html`<p class="muted">${backend}</p>${roles}${engine}${cache}`
}
