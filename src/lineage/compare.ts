import type {
  EvalReport,
  LineageChain,
  RunFilter,
  RunSummary,
  TrainingRunManifest,
  TrainingRunResult,
  EvalReport as Eval,
} from './schemas.ts'
import type { RecordOutcome } from './store.ts'
import { UsageError } from '../usage-error/index.ts'

/** Where lineage lives: a local SQLite file, D1 behind the edge API, or anything else implementing this. */
export interface LineageBackend {
  recordManifest(manifest: TrainingRunManifest): Promise<RecordOutcome>
  recordResult(result: TrainingRunResult): Promise<RecordOutcome>
  recordEval(report: Eval): Promise<RecordOutcome>
  chain(runId: string): Promise<LineageChain | undefined>
  listRuns(filter?: RunFilter): Promise<RunSummary[]>
}

/**
 * The latest eval (by `created_at` as a time) of each benchmark of a run.
 * @example latestEvals(chain).get('gsm8k')?.metrics.accuracy
 */
function latestEvals(chain: LineageChain): Map<string, EvalReport> {
  const latest = new Map<string, EvalReport>()
  for (const report of chain.evals) {
    const seen = latest.get(report.benchmark)
    if (!seen || Date.parse(report.created_at) >= Date.parse(seen.created_at)) latest.set(report.benchmark, report)
  }
  return latest
}

/** One shared metric of two runs: delta = b − a; pct null when a = 0. */
export interface MetricDelta {
  benchmark: string
  metric: string
  a: number
  b: number
  delta: number
  pct: number | null
}

/**
 * The metrics two runs share (per benchmark, latest eval each), sorted by benchmark then metric.
 * @example compareRuns(chainA, chainB).filter((row) => row.pct !== null && row.pct < 0)
 */
export function compareRuns(a: LineageChain, b: LineageChain): MetricDelta[] {
  const left = latestEvals(a)
  const right = latestEvals(b)
  const rows: MetricDelta[] = []
  for (const benchmark of [...left.keys()].filter((name) => right.has(name)).sort()) {
    const ma = left.get(benchmark)!.metrics
    const mb = right.get(benchmark)!.metrics
    for (const metric of Object.keys(ma)
      .filter((name) => Object.hasOwn(mb, name))
      .sort()) {
      const va = ma[metric]!
      const vb = mb[metric]!
      rows.push({
        benchmark,
        metric,
        a: va,
        b: vb,
        delta: vb - va,
        pct: va === 0 ? null : ((vb - va) / Math.abs(va)) * 100,
      })
    }
  }
  return rows
}

/** A metric's better direction and the worsening it tolerates: absolute, or `percent` of |baseline|. */
export interface MetricSpec {
  name: string
  direction: 'higher' | 'lower'
  tolerance: number
  percent: boolean
}

/**
 * Parses `name:higher|lower[:tolerance]`; a tolerance ending in `%` is relative to |baseline|, otherwise absolute.
 * @example parseMetricSpec('loss:lower:2%') // { name: 'loss', direction: 'lower', tolerance: 2, percent: true }
 */
export function parseMetricSpec(text: string): MetricSpec {
  const match = text.match(/^(.+?):(higher|lower)(?::(\d+(?:\.\d+)?)(%)?)?$/)
  if (!match)
    throw new UsageError(
      `--metric "${text}": use name:higher|lower[:tolerance], e.g. accuracy:higher:0.01 or loss:lower:2%`,
    )
  return {
    name: match[1]!,
    direction: match[2] as MetricSpec['direction'],
    tolerance: match[3] === undefined ? 0 : Number(match[3]),
    percent: match[4] === '%',
  }
}

/** One checked metric of one benchmark. */
interface RegressionFinding {
  benchmark: string
  metric: string
  direction: MetricSpec['direction']
  baseline: number
  candidate: number
  delta: number
  /** null when the baseline is 0 (no percentage of zero). */
  pct: number | null
  /** How much worsening was allowed, in the metric's unit. */
  allowed: number
  regression: boolean
}

/** The outcome of check-regression: `regressed` true when any finding is a regression. */
export interface RegressionReport {
  baseline_run_id: string
  candidate_run_id: string
  findings: RegressionFinding[]
  regressed: boolean
}

/**
 * Compares the candidate with the baseline on each named metric, in every benchmark both runs report it (latest eval
 * each). A metric found in no shared benchmark is bad input, never a silent pass. A zero baseline has no percentage:
 * a `%` tolerance then allows no worsening at all.
 * @example checkRegression(base, cand, [parseMetricSpec('accuracy:higher:0.01')]).regressed
 */
export function checkRegression(
  baseline: LineageChain,
  candidate: LineageChain,
  specs: MetricSpec[],
): RegressionReport {
  if (specs.length === 0) throw new UsageError('give at least one --metric name:higher|lower[:tolerance]')
  const base = latestEvals(baseline)
  const cand = latestEvals(candidate)
  const findings: RegressionFinding[] = []
  for (const spec of specs) {
    let found = false
    for (const benchmark of [...base.keys()].filter((name) => cand.has(name)).sort()) {
      const b = base.get(benchmark)!.metrics[spec.name]
      const c = cand.get(benchmark)!.metrics[spec.name]
      if (b === undefined || c === undefined) continue
      found = true
      const allowed = spec.percent ? (Math.abs(b) * spec.tolerance) / 100 : spec.tolerance
      const worsening = spec.direction === 'higher' ? b - c : c - b
      findings.push({
        benchmark,
        metric: spec.name,
        direction: spec.direction,
        baseline: b,
        candidate: c,
        delta: c - b,
        pct: b === 0 ? null : ((c - b) / Math.abs(b)) * 100,
        allowed,
        regression: worsening > allowed,
      })
    }
    if (!found)
      throw new UsageError(
        `metric "${spec.name}" is not reported by any benchmark both "${baseline.run_id}" and "${candidate.run_id}" ` +
          `were evaluated on`,
      )
  }
  return {
    baseline_run_id: baseline.run_id,
    candidate_run_id: candidate.run_id,
    findings,
    regressed: findings.some((finding) => finding.regression),
  }
}

/** The code of the UsageError for a run the store does not hold; the CLI adds which store it read. */
export const RUN_NOT_RECORDED = 'run_not_recorded'

/**
 * Resolves a run reference: an id, or `latest` = the run started last in time (not the last id in string order),
 * among runs with at least one eval, skipping `exclude` (the other side of a comparison).
 * @example const run = await resolveRunRef(backend, 'latest', 'grpo-1')
 */
export async function resolveRunRef(backend: LineageBackend, ref: string, exclude?: string): Promise<LineageChain> {
  if (ref !== 'latest') {
    const chain = await backend.chain(ref)
    if (!chain) throw new UsageError(`no training run "${ref}" is recorded`, { code: RUN_NOT_RECORDED })
    return chain
  }
  for (const run of await backend.listRuns({ limit: 1000 })) {
    if (run.run_id === exclude) continue
    const chain = await backend.chain(run.run_id)
    if (chain && chain.evals.length > 0) return chain
  }
  throw new UsageError(`"latest": no recorded run with evals${exclude ? ` other than "${exclude}"` : ''}`, {
    code: RUN_NOT_RECORDED,
  })
}

/** Per artifact: its latest succeeded run (by time) and that run's latest eval per benchmark. */
export interface ArtifactComparison {
  benchmark: string
  metric: string
  values: Record<string, { run_id: string; value: number } | null>
}

/**
 * Compares artifacts through their latest succeeded training runs: one row per (benchmark, metric) seen.
 * @example await compareArtifacts(backend, ['rm_a…', 'rm_b…'])
 */
export async function compareArtifacts(backend: LineageBackend, artifactIds: string[]): Promise<ArtifactComparison[]> {
  const evalsByArtifact = new Map<string, { runId: string; evals: Map<string, EvalReport> } | null>()
  for (const artifactId of artifactIds) {
    const [run] = await backend.listRuns({ artifact_id: artifactId, status: 'succeeded', limit: 1 })
    const chain = run ? await backend.chain(run.run_id) : undefined
    evalsByArtifact.set(artifactId, chain ? { runId: chain.run_id, evals: latestEvals(chain) } : null)
  }
  const keys = new Map<string, [string, string]>()
  for (const entry of evalsByArtifact.values()) {
    for (const [benchmark, report] of entry?.evals ?? [])
      for (const metric of Object.keys(report.metrics)) keys.set(`${benchmark}\u0000${metric}`, [benchmark, metric])
  }
  return [...keys.values()]
    .sort((x, y) => x[0].localeCompare(y[0]) || x[1].localeCompare(y[1]))
    .map(([benchmark, metric]) => ({
      benchmark,
      metric,
      values: Object.fromEntries(
        artifactIds.map((id) => {
          const entry = evalsByArtifact.get(id)
          const value = entry?.evals.get(benchmark)?.metrics[metric]
          return [id, entry && value !== undefined ? { run_id: entry.runId, value } : null]
        }),
      ),
    }))
}
