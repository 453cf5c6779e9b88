/**
 * `reward-harness report`: one self-contained HTML report (inline CSS and SVG charts, no scripts, no network)
 * of a search output, an evolution log, bench results or a distill summary; the kind is detected from the content. The
 * work is in offline/report (loaded only when the command runs) and src/charts.
 */
import type { Command } from 'commander'
import type { CliContext } from '../program.ts'
import { UsageError } from '../../../src/usage-error/index.ts'

const HELP_AFTER = `
Inputs (detected from the content, and named in the output):
  search output   the JSON of reward-harness search --output (or the directory holding it): objective per
                  generation (best and mean), the best rubric of each prompt, run settings, call counts
  evolution log   evolution-log.jsonl of reward-harness evolve (or its run directory): validation accuracy per
                  iteration with kept / rolled-back changes, the change log, the final library's entries
  bench result    the JSON of reward-harness bench --json / --out, or a directory of them (one subset each):
                  accuracy per subset with 95% intervals, bar charts with whiskers, scores, failures apart
  distill summary summary.json of reward-harness distill (or its --out directory): pairs kept and dropped by
                  reason, agreement between repeats, the bound, the files written
Anything else exits with code 2.

Examples:
  reward-harness report out/best.json --out out/search-report.html
  reward-harness report runs/lib --out runs/lib/report.html
  reward-harness report out/bench/ --out out/bench-report.html`

interface ReportFlags {
  out: string
  title?: string
}

/**
 * Adds `report` to the program.
 * @example register(program, cli) // then: reward-harness report out/best.json --out report.html
 */
export function register(program: Command, cli: CliContext): void {
  program
    .command('report')
    .description(
      'write one self-contained HTML report with charts from a search output, an evolution log, bench results or a ' +
        'distill summary',
    )
    .argument('<input>', 'a search output, an evolution log (or run directory), a bench result, or a directory of them')
    .requiredOption('--out <file.html>', 'where the HTML report goes (directories are created)')
    .option('--title <text>', 'the page title (default: from the input)')
    .addHelpText('after', HELP_AFTER)
    .action(async (input: string, options: ReportFlags, command: Command) => {
      if (!/\.html?$/i.test(options.out))
        throw new UsageError(`--out: the report is HTML; give a .html file, not "${options.out}"`)
      const { detectReportInput, KIND_LABELS, writeReport } = await import('../../report/index.ts')
      const detected = await detectReportInput(input)
      const written = await writeReport(detected, options.out, options.title ? { title: options.title } : {})
      const files = detected.kind === 'bench' ? detected.results.map((result) => result.file) : [detected.path]
      const summary = {
        input: { kind: detected.kind, label: KIND_LABELS[detected.kind], path: detected.path, files },
        out: written.path,
        bytes: written.bytes,
        charts: written.charts,
        title: written.body.title,
      }
      cli.print(
        command,
        summary,
        () =>
          `detected ${KIND_LABELS[detected.kind]}: ${files.join(', ')}\nwrote ${written.path} ` +
          `(${Math.max(1, Math.round(written.bytes / 1024))} KB, ${written.charts} ` +
          `chart${written.charts === 1 ? '' : 's'})`,
      )
    })
}
