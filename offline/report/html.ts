/**
 * Building HTML safely: the `html` tag escapes every interpolated value unless it is already `SafeHtml`
 * (the result of another `html` call, or `trustedHtml` for markup we produced ourselves, like the charts'
 * SVG). Text from the inputs (rubrics, rationales, errors) can therefore never become markup.
 */
import { escapeXml } from '../../src/charts/index.ts'

/** A string that is already HTML. */
export class SafeHtml {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value
  }
}

type Interpolation = SafeHtml | string | number | boolean | null | undefined | readonly Interpolation[]

function render(value: Interpolation): string {
  if (value instanceof SafeHtml) return value.value
  if (Array.isArray(value)) return value.map(render).join('')
  if (value === null || value === undefined || value === false) return ''
  return escapeXml(String(value))
}

/**
 * Tagged template that escapes its values (arrays are joined, null/undefined/false render nothing).
 * @example html`<td>${rubric.text}</td>` // text with < & " escaped
 */
export function html(strings: TemplateStringsArray, ...values: Interpolation[]): SafeHtml {
  let out = strings[0]!
  values.forEach((value, index) => {
    out += render(value) + strings[index + 1]!
  })
  return new SafeHtml(out)
}

/**
 * Marks markup we built ourselves (an SVG from src/charts) as safe to insert as is.
 * @example trustedHtml(lineChart({ title, series }))
 */
export function trustedHtml(markup: string): SafeHtml {
  return new SafeHtml(markup)
}

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
  headers: Interpolation[]
  rows: Interpolation[][]
  numeric?: number[]
  caption?: string
  className?: string
}): SafeHtml {
  const numeric = new Set(options.numeric ?? [])
  const head = (value: Interpolation, index: number) =>
    numeric.has(index) ? html`<th class="num">${value}</th>` : html`<th>${value}</th>`
  const cell = (value: Interpolation, index: number) =>
    numeric.has(index) ? html`<td class="num">${value}</td>` : html`<td>${value}</td>`
  return html`<div class="table-wrap"><table${options.className ? html` class="${options.className}"` : ''}>${options.caption ? html`<caption>${options.caption}</caption>` : ''}<thead><tr>${options.headers.map(head)}</tr></thead><tbody>${options.rows.map((row) => html`<tr>${row.map(cell)}</tr>`)}</tbody></table></div>`
}

/**
 * A definition list of settings.
 * @example keyValues([['seed', 7], ['backend', 'mock']])
 */
export function keyValues(entries: Array<[string, Interpolation]>): SafeHtml {
  return html`<dl class="kv">${entries.map(([key, value]) => html`<dt>${key}</dt><dd>${value === null || value === undefined || value === '' ? '—' : value}</dd>`)}</dl>`
}

/** One headline number at the top of a report. */
export interface Tile {
  label: string
  value: Interpolation
  hint?: Interpolation
}

/**
 * The row of headline numbers.
 * @example tiles([{ label: 'prompts', value: 3 }])
 */
export function tiles(items: Tile[]): SafeHtml {
  return html`<div class="tiles">${items.map((tile) => html`<div class="tile"><div class="tile-label">${tile.label}</div><div class="tile-value">${tile.value}</div>${tile.hint !== undefined ? html`<div class="tile-hint">${tile.hint}</div>` : ''}</div>`)}</div>`
}

/**
 * A chart with its caption.
 * @example figure(barChart({ title: 'Accuracy', bars }), 'Wilson 95% intervals')
 */
export function figure(svg: string, caption?: Interpolation): SafeHtml {
  return html`<figure class="chart">${trustedHtml(svg)}${caption ? html`<figcaption>${caption}</figcaption>` : ''}</figure>`
}

/** A titled part of a report. */
export interface Section {
  id: string
  title: string
  body: SafeHtml
}

/** What a report renderer returns: the page's headline parts and its sections. */
export interface ReportBody {
  kind: 'search' | 'evolve' | 'bench' | 'distill'
  /** What was detected, e.g. "search output". */
  label: string
  title: string
  subtitle?: Interpolation
  tiles: Tile[]
  sections: Section[]
  /** Charts drawn (for the CLI's summary line). */
  charts: number
}

/** Charts are drawn at about the size they are shown, so their 12 px text stays 12 px. */
export const CHART_SIZE = { width: 720, height: 340 } as const

const STYLE = `
:root{--ink:#1f2937;--muted:#6b7280;--line:#e5e7eb;--bg:#f3f4f6;--card:#fff;--accent:#0072B2;--good:#047857;--bad:#b91c1c;--warn:#92400e}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);font:15px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif}
header{background:#111827;color:#f9fafb;padding:28px 0 24px}
.wrap{max-width:1080px;margin:0 auto;padding:0 24px}
header .kind{display:inline-block;font-size:12px;letter-spacing:.06em;text-transform:uppercase;background:var(--accent);color:#fff;border-radius:999px;padding:2px 10px}
header h1{margin:10px 0 4px;font-size:26px;line-height:1.25}
header .source{color:#d1d5db;font-size:13px;word-break:break-all}
header .subtitle{color:#e5e7eb;margin-top:4px}
nav{padding:10px 0;background:#fff;border-bottom:1px solid var(--line);font-size:14px}
nav .wrap{display:flex;flex-wrap:wrap;gap:6px 18px}
nav a{color:var(--accent);text-decoration:none}
main{max-width:1080px;margin:0 auto;padding:24px 24px 48px}
section{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:20px 24px;margin:0 0 20px}
section h2{margin:0 0 14px;font-size:19px}
h3{font-size:16px;margin:18px 0 8px}
.tiles{display:grid;grid-template-columns:repeat(auto-fit,minmax(160px,1fr));gap:12px;margin:0 0 20px}
.tile{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:12px 16px}
.tile-label{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.04em}
.tile-value{font-size:22px;font-weight:600;font-variant-numeric:tabular-nums;word-break:break-word}
.tile-hint{color:var(--muted);font-size:13px}
.charts{display:flex;flex-direction:column;gap:16px}
figure.chart{margin:0;max-width:740px;border:1px solid var(--line);border-radius:8px;padding:8px;background:#fff}
figure.chart svg{display:block;width:100%;height:auto}
figcaption{color:var(--muted);font-size:13px;padding:6px 4px 0}
.table-wrap{overflow-x:auto;margin:0 0 8px}
table{border-collapse:collapse;width:100%;font-size:14px}
caption{text-align:left;color:var(--muted);padding:0 0 6px}
th,td{text-align:left;vertical-align:top;padding:6px 10px;border-bottom:1px solid var(--line)}
th{background:#f9fafb;font-weight:600;white-space:nowrap}
tbody tr:nth-child(even) td{background:#fcfcfd}
.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.ci{display:block;color:var(--muted);font-size:12px}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:4px 16px;margin:0;font-size:14px}
dl.kv dt{color:var(--muted)}
dl.kv dd{margin:0;word-break:break-word}
td code{white-space:nowrap}
.path{word-break:break-all}
table.changes td:nth-child(4){min-width:13em}
table.changes th,table.changes td{padding:6px 7px}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px}
pre{white-space:pre-wrap;word-break:break-word;background:#f9fafb;border:1px solid var(--line);border-radius:6px;padding:10px 12px;font-size:13px;margin:8px 0}
details{margin:8px 0}
summary{cursor:pointer}
.badge{display:inline-block;border-radius:999px;padding:1px 9px;font-size:12px;font-weight:600;white-space:nowrap}
.badge.kept,.badge.ok{background:#d1fae5;color:var(--good)}
.badge.rolled_back,.badge.bad{background:#fee2e2;color:var(--bad)}
.badge.skipped{background:#f3f4f6;color:var(--muted)}
.badge.rejected{background:#fef3c7;color:var(--warn)}
.badge.baseline{background:#dbeafe;color:#1e40af}
.muted{color:var(--muted)}
.card{border:1px solid var(--line);border-radius:8px;padding:12px 16px;margin:12px 0}
.card h3{margin-top:0}
.failures{border-left:4px solid var(--bad)}
.empty{color:var(--muted);font-style:italic}
footer{color:var(--muted);font-size:13px;text-align:center;padding:0 0 32px}
@media (min-width:1600px){.wrap,main{max-width:1560px}.charts{flex-direction:row;flex-wrap:wrap}figure.chart{flex:1 1 600px}}
@media print{body{background:#fff}header{color:#000;background:#fff}nav{display:none}section{break-inside:avoid}}
`

/**
 * The whole self-contained page: inline CSS, inline SVG, no scripts and no external URL. A strict
 * Content-Security-Policy forbids any script or network load even if something slipped through.
 * @example const page = renderPage(body, '/runs/a/best.json')
 */
export function renderPage(body: ReportBody, source: string): string {
  const page = html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<meta name="generator" content="reward-harness report">
<title>${body.title}</title>
<style>${trustedHtml(STYLE)}</style>
</head>
<body data-report-kind="${body.kind}">
<header><div class="wrap"><span class="kind">${body.label}</span><h1>${body.title}</h1>${body.subtitle ? html`<div class="subtitle">${body.subtitle}</div>` : ''}<div class="source">${source}</div></div></header>
<nav><div class="wrap">${body.sections.map((section) => html`<a href="#${section.id}">${section.title}</a>`)}</div></nav>
<main>
${tiles(body.tiles)}
${body.sections.map((section) => html`<section id="${section.id}"><h2>${section.title}</h2>${section.body}</section>\n`)}
</main>
<footer>Written by <code>reward-harness report</code> from ${source}. One file: no scripts, no network.</footer>
</body>
</html>
`
  return page.value
}
