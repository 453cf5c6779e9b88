/** Text renderings of lineage for the CLI. */
import type { ArtifactComparison, MetricDelta, RegressionReport } from '../../src/lineage/compare.ts'
import type { LineageChain } from '../../src/lineage/schemas.ts'

/**
 * A metric's value as the CLI prints it: an integer as is, anything else to four decimals (a mean that came out as
 * 0.6500000000000001 reads 0.6500).
 * @example metricText(0.1 + 0.55) // '0.6500'
 */
export function metricText(value: number): string {
  return Number.isInteger(value) ? String(value) : value.toFixed(4)
}
const num = metricText
const pct = (value: number | null) => (value === null ? 'n/a' : `${value >= 0 ? '+' : ''}${value.toFixed(2)}%`)

/**
 * The chain artifact → deployment → training run → evals, one block.
 * @example console.log(formatChain(chain))
 */
export function formatChain(chain: LineageChain): string {
  const m = chain.manifest
  const lines = [
    `artifact    ${chain.artifact_id}`,
    `deployment  ` +
      `${chain.deploy_id ?? '(none)'}${chain.target ? ` on target ${chain.target}` : ''}` +
      `${chain.deployment ? ` (${chain.deployment.action} at ${chain.deployment.deployed_at})` : ''}`,
    `training    ${chain.run_id}: ${m.trainer.name} · model ${m.model.name} · dataset ` +
      `${m.dataset.id}@${m.dataset.version} · started ${m.started_at}`,
    `result      ${
      chain.result
        ? `${chain.result.status} at ${chain.result.finished_at}${
            Object.keys(chain.result.metrics).length
              ? ` · ${Object.entries(chain.result.metrics)
                  .map(([k, v]) => `${k}=${num(v)}`)
                  .join(' ')}`
              : ''
          }`
        : '(none yet)'
    }`,
    `evals       ${chain.evals.length === 0 ? '(none)' : ''}`,
    ...chain.evals.map(
      (report) =>
        `  ${report.created_at}  ${report.benchmark}  ${Object.entries(report.metrics)
          .map(([k, v]) => `${k}=${num(v)}`)
          .join(' ')}  (${report.eval_id})`,
    ),
  ]
  return lines.join('\n')
}

/**
 * One line per shared metric: a → b (delta, pct).
 * @example console.log(formatDeltas('a', 'b', compareRuns(a, b)))
 */
export function formatDeltas(a: string, b: string, rows: MetricDelta[]): string {
  if (rows.length === 0) return `runs "${a}" and "${b}" share no benchmark metric`
  return rows
    .map(
      (row) =>
        `${row.benchmark}/${row.metric}: ${num(row.a)} -> ${num(row.b)} ` +
        `(${row.delta >= 0 ? '+' : ''}${num(row.delta)}, ${pct(row.pct)})`,
    )
    .join('\n')
}

/**
 * One line per (benchmark, metric) with each artifact's value.
 * @example console.log(formatArtifacts(rows))
 */
export function formatArtifacts(rows: ArtifactComparison[]): string {
  if (rows.length === 0) return 'no succeeded run with evals for these artifacts'
  return rows
    .map(
      (row) =>
        `${row.benchmark}/${row.metric}: ${Object.entries(row.values)
          .map(([id, v]) => `${id}=${v ? `${num(v.value)} (${v.run_id})` : '-'}`)
          .join('  ')}`,
    )
    .join('\n')
}

/**
 * `[REGRESSION]` / `[ok]` per finding, then a verdict.
 * @example console.log(formatRegression(report))
 */
export function formatRegression(report: RegressionReport): string {
  const lines = report.findings.map(
    (f) =>
      `[${f.regression ? 'REGRESSION' : 'ok'}] ${f.benchmark}/${f.metric} (${f.direction} is better): ` +
      `${num(f.baseline)} -> ${num(f.candidate)} (${pct(f.pct)}, allowed worsening ${num(f.allowed)})`,
  )
  lines.push(
    report.regressed
      ? `regression: candidate "${report.candidate_run_id}" is worse than baseline "${report.baseline_run_id}"`
      : `no regression: candidate "${report.candidate_run_id}" vs baseline "${report.baseline_run_id}"`,
  )
  return lines.join('\n')
}
