/**
 * The standalone report page as Hono JSX: inline CSS, inline SVG, no scripts and no external URL. A strict
 * Content-Security-Policy forbids any script or network load even if something slipped through.
 */
import { raw } from 'hono/html'
import type { FC } from 'hono/jsx'
import type { ReportBody, Tile } from './parts.ts'

const STYLES = `
:root{--ink:#1f2937;--muted:#6b7280;--line:#e5e7eb;--bg:#f3f4f6;--card:#fff;--accent:#0072B2;--good:#047857;
  --bad:#b91c1c;--warn:#92400e}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);font:15px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif}
header{background:#111827;color:#f9fafb;padding:28px 0 24px}
.wrap{max-width:1080px;margin:0 auto;padding:0 24px}
header .kind{display:inline-block;font-size:12px;letter-spacing:.06em;text-transform:uppercase;
  background:var(--accent);color:#fff;border-radius:999px;padding:2px 10px}
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
pre{white-space:pre-wrap;word-break:break-word;background:#f9fafb;border:1px solid \
var(--line);border-radius:6px;padding:10px 12px;font-size:13px;margin:8px 0}
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
@media (min-width:1600px){.wrap,main{max-width:1560px}.charts{flex-direction:row;flex-wrap:wrap}figure.chart{flex:1 1 \
600px}}
@media print{body{background:#fff}header{color:#000;background:#fff}nav{display:none}section{break-inside:avoid}}
`

const CONTENT_SECURITY_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

/**
 * The row of headline numbers.
 * @example <Tiles items={[{ label: 'prompts', value: 3 }]} />
 */
const Tiles: FC<{ items: Tile[] }> = ({ items }) => (
  <div class="tiles">
    {items.map((tile) => (
      <div class="tile">
        <div class="tile-label">{tile.label}</div>
        <div class="tile-value">{tile.value}</div>
        {tile.hint !== undefined && <div class="tile-hint">{tile.hint}</div>}
      </div>
    ))}
  </div>
)

/**
 * The whole page of a report body read from `source`.
 * @example <ReportPage body={body} source="/runs/a/best.json" />
 */
const ReportPage: FC<{ body: ReportBody; source: string }> = ({ body, source }) => (
  <>
    {raw('<!doctype html>\n')}
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta http-equiv="Content-Security-Policy" content={raw(CONTENT_SECURITY_POLICY)} />
        <meta name="generator" content="reward-harness report" />
        <title>{body.title}</title>
        <style>{raw(STYLES)}</style>
      </head>
      <body data-report-kind={body.kind}>
        <header>
          <div class="wrap">
            <span class="kind">{body.label}</span>
            <h1>{body.title}</h1>
            {body.subtitle ? <div class="subtitle">{body.subtitle}</div> : ''}
            <div class="source">{source}</div>
          </div>
        </header>
        <nav>
          <div class="wrap">
            {body.sections.map((section) => (
              <a href={`#${section.id}`}>{section.title}</a>
            ))}
          </div>
        </nav>
        <main>
          <Tiles items={body.tiles} />
          {body.sections.map((section) => (
            <section id={section.id}>
              <h2>{section.title}</h2>
              {section.body}
            </section>
          ))}
        </main>
        <footer>
          Written by <code>reward-harness report</code> from {source}. One file: no scripts, no network.
        </footer>
      </body>
    </html>
  </>
)

/**
 * The page as one HTML string.
 * @example const page = await renderPage(body, '/runs/a/best.json')
 */
export async function renderPage(body: ReportBody, source: string): Promise<string> {
  return String(await (<ReportPage body={body} source={source} />).toString())
}
