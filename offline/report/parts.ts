/**
 * The pieces a report body is built from, on `hono/html`: the `html` tag escapes every interpolated value unless
 * it is already markup (another `html` result, a JSX element, or `raw` for the charts' SVG), so text from the
 * inputs (rubrics, rationales, errors) can never become markup.
 */
import { html } from 'hono/html'
import { type Child, jsx } from 'hono/jsx'
import { Chart } from '../../workers/dashboard/views/layout.tsx'

/** Markup built by `html` (or a JSX element), ready to place in a page. */
export type Markup = ReturnType<typeof html>

/**
 * A percentage with one decimal, or an em dash for a missing value.
 * @example pct(0.5234) // '52.3%'
 */
export function pct(value: number | null | undefined): string {
  return typeof value === 'number' && Number.isFinite(value) ? `${(value * 100).toFixed(1)}%` : '—'
}

/**
 * A number with up to `digits` decimals (trailing zeros dropped), or an em dash.
 * @example num(0.71234) // '0.712'
 */
export function num(value: number | null | undefined, digits = 3): string {
  if (typeof value !== 'number' || !Number.isFinite(value)) return '—'
  return Number.isInteger(value) ? value.toLocaleString('en-US') : String(Number(value.toFixed(digits)))
}

/**
 * A table; `numeric` columns are right-aligned with tabular digits.
 * @example table({ headers: ['role', 'calls'], rows: [['verifier', '390']], numeric: [1] })
 */
export function table(options: {
  headers: Child[]
  rows: Child[][]
  numeric?: number[]
  caption?: string
  className?: string
}): Markup {
  const numeric = new Set(options.numeric ?? [])
  const head = (value: Child, index: number) =>
    numeric.has(index) ? html`<th class="num">${value}</th>` : html`<th>${value}</th>`
  const cell = (value: Child, index: number) =>
    numeric.has(index) ? html`<td class="num">${value}</td>` : html`<td>${value}</td>`
  const className = options.className ? html` class="${options.className}"` : ''
  const caption = options.caption ? html`<caption>${options.caption}</caption>` : ''
  const rows = options.rows.map((row) => html`<tr>${row.map(cell)}</tr>`)
  const header = html`<thead><tr>${options.headers.map(head)}</tr></thead>`
  return html`<div class="table-wrap"><table${className}>${caption}${header}<tbody>${rows}</tbody></table></div>`
}

/**
 * A definition list of settings.
 * @example keyValues([['seed', 7], ['backend', 'mock']])
 */
export function keyValues(entries: Array<[string, Child]>): Markup {
  const shown = (value: Child) => (value === null || value === undefined || value === '' ? '—' : value)
  return html`<dl class="kv">${entries.map(([key, value]) => html`<dt>${key}</dt><dd>${shown(value)}</dd>`)}</dl>`
}

/**
 * A chart with its caption, framed as the dashboard frames its charts.
 * @example figure(barChart({ title: 'Accuracy', bars }), 'Wilson 95% intervals')
 */
export function figure(svg: string, caption?: string): Child {
  return jsx(Chart, caption ? { svg, caption } : { svg })
}

/** One headline number at the top of a report. */
export interface Tile {
  label: string
  value: Child
  hint?: Child
}

/** A titled part of a report. */
interface Section {
  id: string
  title: string
  body: Child
}

/** What a report renderer returns: the page's headline parts and its sections. */
export interface ReportBody {
  kind: 'search' | 'evolve' | 'bench' | 'distill'
  /** What was detected, e.g. "search output". */
  label: string
  title: string
  subtitle?: Child
  tiles: Tile[]
  sections: Section[]
  /** Charts drawn (for the CLI's summary line). */
  charts: number
}

/** Charts are drawn at about the size they are shown, so their 12 px text stays 12 px. */
export const CHART_SIZE = { width: 720, height: 340 } as const
