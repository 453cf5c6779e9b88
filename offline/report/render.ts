/**
 * From a detected input to the page: picks the renderer for its kind and wraps the result in the
 * self-contained HTML shell.
 */
import { basename } from 'node:path'
import { writeFileAtomic } from '../search/atomic.ts'
import { benchReport } from './bench.ts'
import { distillReport } from './distill.ts'
import type { ReportInput } from './detect.ts'
import { evolveReport } from './evolve.ts'
import { renderPage } from './page.tsx'
import type { ReportBody } from './parts.ts'
import { searchReport } from './search.ts'

/**
 * The report body (title, headline numbers, sections) of an input.
 * @example reportBody(await detectReportInput('out/best.json')).sections.map((section) => section.id)
 */
function reportBody(input: ReportInput): ReportBody {
  switch (input.kind) {
    case 'search':
      return searchReport(input.output, basename(input.path))
    case 'evolve':
      return evolveReport(input.log, input.finalLibrary, input.bestLibrary)
    case 'bench':
      return benchReport(input.results)
    case 'distill':
      return distillReport(input.summary)
  }
}

/**
 * The whole HTML page of an input, with an optional title of the caller's.
 * @example const page = await renderReport(await detectReportInput('runs/lib'))
 */
async function renderReport(
  input: ReportInput,
  options: { title?: string } = {},
): Promise<{ html: string; body: ReportBody }> {
  const body = reportBody(input)
  if (options.title) body.title = options.title
  return { html: await renderPage(body, input.path), body }
}

/**
 * Renders `input` and writes the page to `out` atomically; returns what was written.
 * @example const written = await writeReport(input, 'report.html') // { path: 'report.html', bytes: 48213, charts: 3 }
 */
export async function writeReport(
  input: ReportInput,
  out: string,
  options: { title?: string } = {},
): Promise<{ path: string; bytes: number; charts: number; body: ReportBody }> {
  const { html, body } = await renderReport(input, options)
  await writeFileAtomic(out, html)
  return { path: out, bytes: Buffer.byteLength(html), charts: body.charts, body }
}
