/**
 * `reward-harness bench`: load a dataset, score every candidate blind with a scorer, compute the metrics of
 * src/bench (overall and per group), and format them as a table or JSON.
 */
import { mkdir, writeFile } from 'node:fs/promises'
import { dirname, resolve } from 'node:path'
import type { BenchReport } from '../../src/schemas/index.ts'
import {
  type Accuracy,
  benchMetrics,
  metricsByGroup,
  type ScoredItem,
  type TiePolicy,
  truthOf,
} from '../../src/bench/metrics.ts'
import { loadDataset } from '../datasets/load.ts'
import { startProgress } from '../progress/index.ts'
import { blindItem, createScorer, parseScorerSpec, type ScorerOptions } from './scorers.ts'

/** What `runBench` needs. */
export interface BenchOptions extends Partial<ScorerOptions> {
  dataset: string
  scorer: string
  ties?: TiePolicy
  bootstrap?: number
  /** Group of prompts without one (default: `all`). */
  group?: string
  /** Show how many candidates are scored on stderr (the shared progress display). */
  showProgress?: boolean
}

export type { BenchReport } from '../../src/schemas/index.ts'

/**
 * Runs a benchmark. Bad input (dataset, scorer spec or file) throws DatasetError / UsageError; scorer errors per
 * candidate are failures in the report.
 * @example const report = await runBench({ dataset: 'examples/demo.json', scorer: 'mock', seed: 0, concurrency: 4 })
 */
export async function runBench(options: BenchOptions): Promise<BenchReport> {
  const started = Date.now()
  const seed = options.seed ?? 0
  const ties = options.ties ?? 'half'
  const bootstrap = options.bootstrap ?? 0
  const spec = parseScorerSpec(options.scorer)
  const loaded = await loadDataset(options.dataset)
  const prompts = loaded.dataset.prompts
  const total = prompts.reduce((sum, item) => sum + item.candidates.length, 0)
  const progress = options.showProgress ? startProgress({ label: 'scoring', total }) : undefined
  let scored = 0
  const onScored = progress ? (candidates: number) => progress.update((scored += candidates)) : undefined
  const scorer = await createScorer(spec, {
    concurrency: options.concurrency ?? 4,
    seed,
    datasetPath: options.dataset,
    ...pick(options),
    ...(onScored ? { onScored } : {}),
  })
  const scores = await scorer.scoreAll(prompts.map((item) => blindItem(item, seed))).finally(() => progress?.stop())
  const items: ScoredItem[] = prompts.map((item, itemIndex) => ({
    item_id: item.prompt_id,
    group: item.group ?? options.group ?? 'all',
    candidates: item.candidates.map((candidate, candidateIndex) => {
      const result = scores[itemIndex]?.[candidateIndex] ?? { error: 'not scored' }
      return {
        candidate_id: candidate.candidate_id,
        truth: truthOf(candidate.label),
        ...('score' in result ? { score: result.score } : { score: null, error: result.error }),
      }
    }),
  }))
  const failed = items.flatMap((item) =>
    item.candidates
      .filter((candidate) => candidate.score === null)
      .map((candidate) => ({
        prompt_id: item.item_id,
        candidate_id: candidate.candidate_id,
        error: candidate.error ?? 'unknown',
      })),
  )
  const metricOptions = { ties, bootstrap, seed }
  return {
    schema_version: 1,
    dataset: {
      path: options.dataset,
      sha256: loaded.sha256,
      shape: loaded.shape,
      items: prompts.length,
      candidates: prompts.reduce((sum, item) => sum + item.candidates.length, 0),
    },
    scorer: scorer.name,
    ...(scorer.ownRubricItems
      ? { in_sample: { items: scorer.ownRubricItems(prompts).length, of: prompts.length } }
      : {}),
    model: options.model?.id ?? 'mock:mock-heuristic-1',
    seed,
    ties,
    bootstrap,
    overall: benchMetrics(items, metricOptions),
    groups: metricsByGroup(items, metricOptions),
    failures: {
      count: failed.length,
      items: new Set(failed.map((failure) => failure.prompt_id)).size,
      examples: failed.slice(0, 20),
      by_error: countErrors(failed),
    },
    scores: items.map((item) => ({
      prompt_id: item.item_id,
      group: item.group,
      candidates: item.candidates.map((candidate) => ({
        candidate_id: candidate.candidate_id,
        truth: candidate.truth ?? null,
        score: candidate.score,
        ...(candidate.error ? { error: candidate.error } : {}),
      })),
    })),
    elapsed_ms: Date.now() - started,
  }
}

function pick(options: BenchOptions): Partial<ScorerOptions> {
  return {
    ...(options.model ? { model: options.model } : {}),
    ...(options.token ? { token: options.token } : {}),
    ...(options.chunkSize ? { chunkSize: options.chunkSize } : {}),
    ...(options.requestTimeoutMs ? { requestTimeoutMs: options.requestTimeoutMs } : {}),
    ...(options.fetch ? { fetch: options.fetch } : {}),
    ...(options.judging ? { judging: options.judging } : {}),
  }
}

/**
 * Writes the report as JSON (directories are created).
 * @example await writeReport(report, 'out/bench.json')
 */
export async function writeReport(report: BenchReport, file: string): Promise<string> {
  const path = resolve(file)
  await mkdir(dirname(path), { recursive: true })
  await writeFile(path, `${JSON.stringify(report, null, 2)}\n`)
  return path
}

/**
 * Formats an accuracy as `75.0% [95% CI 40.9–92.9] (n=8, ties 1, failures 0)`.
 * @example formatAccuracy(accuracyOf(['correct', 'wrong'], 'half'))
 */
function formatAccuracy(accuracy: Accuracy | null | undefined): string {
  if (!accuracy) return '—'
  if (accuracy.accuracy === null) return `— (n=0, failures ${accuracy.failures})`
  const ci = accuracy.ci95 ? ` [95% CI ${pct(accuracy.ci95[0])}–${pct(accuracy.ci95[1])}]` : ''
  const boot = accuracy.bootstrap95
    ? ` [bootstrap ${pct(accuracy.bootstrap95[0])}–${pct(accuracy.bootstrap95[1])}]`
    : ''
  return (
    `${pct(accuracy.accuracy)}%${ci}${boot} (n=${accuracy.n}, ties ${accuracy.ties}, failures ` +
    `${accuracy.failures})`
  )
}

/**
 * The human-readable report: headline metrics, then a per-group table, then failures.
 * @example console.log(formatReport(report))
 */
export function formatReport(report: BenchReport): string {
  const o = report.overall
  const lines = [
    `bench ${report.dataset.path} (${report.dataset.shape}, ${report.dataset.items} items, ` +
      `${report.dataset.candidates} candidates) with ${report.scorer}, seed ${report.seed}`,
    `ties count as ${report.ties === 'half' ? 'half correct' : 'wrong'}; failures are excluded from n and reported ` +
      `apart`,
  ]
  const inSample = report.in_sample
  if (inSample && inSample.items > 0)
    lines.push(
      `IN-SAMPLE: ${inSample.items} of ${inSample.of} items are graded with a rubric searched on that very prompt: ` +
        'their accuracy says how well the search fit its data, not how it does on new prompts (bench a held-out ' +
        'dataset with `export --default-rubric best` for that)',
    )
  if (o.pairwise) {
    lines.push(`  pairwise accuracy (A/B)     ${formatAccuracy(o.pairwise.ab)}`)
    lines.push(`  pairwise accuracy (B/A)     ${formatAccuracy(o.pairwise.ba)}`)
    lines.push(`  swap-consistent accuracy    ${formatAccuracy(o.pairwise.swap_consistent)}`)
  }
  if (o.kway) lines.push(`  K-way accuracy (>2 cands)   ${formatAccuracy(o.kway)}`)
  if (o.pairs_within_kway) lines.push(`  pairs within K-way items    ${formatAccuracy(o.pairs_within_kway)}`)
  if (o.tail) lines.push(`  tail accuracy (top 25%)     ${formatAccuracy(o.tail)}`)
  lines.push(
    `  failures                    ${report.failures.count} candidate${report.failures.count === 1 ? '' : 's'} in ` +
      `${report.failures.items} item${report.failures.items === 1 ? '' : 's'}`,
  )
  const groups = Object.entries(report.groups)
  if (groups.length > 0) {
    const width = Math.max(5, ...groups.map(([name]) => name.length))
    lines.push('', `  ${'group'.padEnd(width)}  items  pair A/B  pair B/A  swap    K-way   tail    ties  failed`)
    for (const [name, m] of groups) {
      const cell = (accuracy: Accuracy | null | undefined) =>
        (accuracy && accuracy.accuracy !== null ? `${pct(accuracy.accuracy)}%` : '—').padEnd(8)
      const ties = (m.pairwise?.ab.ties ?? 0) + (m.kway?.ties ?? 0)
      lines.push(
        `  ${name.padEnd(width)}  ${String(m.items).padStart(5)}  ${cell(m.pairwise?.ab)}  ${cell(m.pairwise?.ba)}  ` +
          `${cell(m.pairwise?.swap_consistent)}${cell(m.kway)}${cell(m.tail)}${String(ties).padStart(4)}  ` +
          `${String(m.failed_items).padStart(6)}`,
      )
    }
  }
  if (report.failures.count > 0) {
    // One line per distinct error with its count: a target that cannot be read fails every candidate the same way.
    const byError = report.failures.by_error ?? countErrors(report.failures.examples)
    lines.push('', `failures (${report.failures.count}, by error):`)
    for (const { error, count } of byError.slice(0, 5)) {
      const first = report.failures.examples.find((failure) => failure.error === error)
      lines.push(`  ${count}× ${error}${first ? ` (first: ${first.prompt_id} / ${first.candidate_id})` : ''}`)
    }
    if (byError.length > 5) lines.push(`  … and ${byError.length - 5} other errors`)
  }
  return lines.join('\n')
}

/** Each distinct error of `failed` with its count, most frequent first. */
function countErrors(failed: readonly { error: string }[]): { error: string; count: number }[] {
  const counts = new Map<string, number>()
  for (const { error } of failed) counts.set(error, (counts.get(error) ?? 0) + 1)
  return [...counts].map(([error, count]) => ({ error, count })).sort((a, b) => b.count - a.count)
}

function pct(value: number): string {
  return (value * 100).toFixed(1)
}
