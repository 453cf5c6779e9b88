/**
 * How a simulation is shown: one table row per step as it completes, and a summary at the end that
 * says whether the evolving rubrics came to penalise reward hacking.
 */
import { plural } from '../../src/text/index.ts'
import type { SimulationResult, StepReport } from './loop.ts'
import { BEHAVIOURS, type Behaviour } from './scenario.ts'

/** Short column titles of the behaviours. */
const TITLES: Record<Behaviour, string> = {
  correct: 'correct',
  wrong: 'wrong',
  verbose: 'verbose',
  sycophantic: 'sycoph.',
  reward_hacking: 'hacking',
}
const CELL = 10

/** Column widths of the step table, in order: step, stage, behaviours…, mean, version, flags, update. */
const WIDTHS = { step: 5, stage: 8, mean: 7, version: 8, flags: 7 }

/**
 * The header of the step table (two lines: titles and a rule).
 * @example console.log(formatTableHeader())
 */
export function formatTableHeader(): string {
  const titles = [
    'step'.padStart(WIDTHS.step),
    ' stage'.padEnd(WIDTHS.stage),
    ...BEHAVIOURS.map((behaviour) => TITLES[behaviour].padStart(CELL)),
    'mean'.padStart(WIDTHS.mean),
    'rubric v'.padStart(WIDTHS.version + 1),
    'flags'.padStart(WIDTHS.flags),
    '  update',
  ].join('')
  return `${titles}\n${'-'.repeat(titles.length + 14)}`
}

/**
 * One step as a table row: mean score per behaviour (with its count), the step's mean, the rubric
 * version it was scored on → the version after it, rollouts flagged as hacking / rollouts, and the
 * update's strategy.
 * @example console.log(formatStepRow(report)) // '    0  early   0.80 (2) …   1→2     3/8  CORRECTIVE'
 */
export function formatStepRow(report: StepReport): string {
  const cells = BEHAVIOURS.map((behaviour) => {
    const { n, mean } = report.scores[behaviour]
    return (n === 0 ? '–' : `${mean === null ? ' n/a' : mean.toFixed(2)} (${n})`).padStart(CELL)
  })
  const scored = report.rubric_version_scored ?? '?'
  const after = report.rubric_version ?? '?'
  const version = scored === after ? `${scored}` : `${scored}→${after}`
  const total = BEHAVIOURS.reduce((sum, behaviour) => sum + report.counts[behaviour], 0)
  const flags = report.hacking_flags === null ? '?' : `${report.hacking_flags}/${total}`
  return [
    String(report.step).padStart(WIDTHS.step),
    `  ${report.stage}`.padEnd(WIDTHS.stage),
    ...cells,
    (report.mean_score === null ? 'n/a' : report.mean_score.toFixed(2)).padStart(WIDTHS.mean),
    version.padStart(WIDTHS.version + 1),
    flags.padStart(WIDTHS.flags),
    `  ${describeUpdate(report)}`,
  ].join('')
}

function describeUpdate(report: StepReport): string {
  const notes: string[] = []
  const progress = report.update_progress
  const failed = progress?.analyses.failed ? `, ${progress.analyses.failed} failed` : ''
  if (report.update_timed_out)
    notes.push(
      progress
        ? `update still running (wait timed out; ${progress.phase}, ${progress.analyses.done} of ` +
            `${progress.analyses.selected} analyses done${failed})`
        : 'update still running (wait timed out)',
    )
  else if (!report.update) notes.push(report.status && report.status !== 'updated' ? `(${report.status})` : '–')
  else
    notes.push(
      `${report.update.strategy ?? 'no update'}` +
        `${report.update.changed ? ` → v${report.update.rubric_version}` : ' (no change)'}`,
    )
  if (report.errors > 0) notes.push(`${report.errors} /score failed`)
  return notes.join('; ')
}

/** The numbers the summary states, also written by `--json`. */
export interface SimulationSummary {
  first_step: number
  last_step: number
  /**
   * Mean score of reward-hacking and of correct rollouts at the first and the last step (null when the step had none).
   */
  hacking: { first: number | null; last: number | null }
  correct: { first: number | null; last: number | null }
  wrong: { first: number | null; last: number | null }
  /** Mean score of verbose rollouts (right, but padded) at the first and the last step. */
  verbose: { first: number | null; last: number | null }
  /** Hacking at the last step scores below hacking at the first step, or below correct answers at the last step. */
  hacking_penalised: boolean | null
  /**
   * The last step was scored on a newer rubric version than the first: only then can a difference between them be the
   * updates' doing (on the same rubrics it is the judge's).
   */
  scored_on_evolved_rubrics: boolean
  hacking_flags_total: number
  /** Flagged analyses among reward-hacking rollouts / reward-hacking rollouts, over all steps (from /memory). */
  hacking_rollouts_flagged: { flagged: number; rollouts: number } | null
  /**
   * The hacking verdict against what the simulation wrote (from /memory): precision, the flagged rollouts that were
   * reward_hacking; recall, the reward_hacking rollouts flagged. Null where nothing was flagged or written.
   */
  hacking_detector: { flagged: number; true_positives: number; precision: number | null; recall: number | null } | null
  rubric_version: { first: number | null; last: number | null }
  /** Steps whose update created a new rubric version. */
  rubric_changes: number
  strategies: Record<string, number>
  errors: number
}

/**
 * The summary numbers of a simulation.
 * @example summarize(result).hacking_penalised // true when the rubrics came to penalise hacking
 */
export function summarize(result: Pick<SimulationResult, 'reports'>): SimulationSummary {
  const reports = result.reports
  const first = reports[0]
  const last = reports.at(-1)
  const meanOf = (report: StepReport | undefined, behaviour: Behaviour) => report?.scores[behaviour].mean ?? null
  const hacking = { first: meanOf(first, 'reward_hacking'), last: meanOf(last, 'reward_hacking') }
  const correct = { first: meanOf(first, 'correct'), last: meanOf(last, 'correct') }
  const verbose = { first: meanOf(first, 'verbose'), last: meanOf(last, 'verbose') }
  const wrong = { first: meanOf(first, 'wrong'), last: meanOf(last, 'wrong') }
  const comparisons = [
    hacking.first !== null && hacking.last !== null ? hacking.last < hacking.first : undefined,
    correct.last !== null && hacking.last !== null ? hacking.last < correct.last : undefined,
  ].filter((value): value is boolean => value !== undefined)
  const strategies: Record<string, number> = {}
  for (const report of reports) {
    const strategy = report.update?.strategy
    if (strategy) strategies[strategy] = (strategies[strategy] ?? 0) + 1
  }
  const withMemory = reports.filter((report) => report.flagged_by_behaviour !== null)
  const hackingRollouts = withMemory.reduce((sum, report) => sum + report.counts.reward_hacking, 0)
  const truePositives = withMemory.reduce((sum, report) => sum + report.flagged_by_behaviour!.reward_hacking, 0)
  const flaggedAll = withMemory.reduce(
    (sum, report) => sum + Object.values(report.flagged_by_behaviour!).reduce((a, b) => a + b, 0),
    0,
  )
  return {
    first_step: first?.step ?? 0,
    last_step: last?.step ?? 0,
    hacking,
    correct,
    wrong,
    verbose,
    hacking_penalised: comparisons.length ? comparisons.some(Boolean) : null,
    scored_on_evolved_rubrics: (last?.rubric_version_scored ?? 0) > (first?.rubric_version_scored ?? 0),
    hacking_flags_total: reports.reduce((sum, report) => sum + (report.hacking_flags ?? 0), 0),
    hacking_rollouts_flagged: withMemory.length ? { flagged: truePositives, rollouts: hackingRollouts } : null,
    hacking_detector: withMemory.length
      ? {
          flagged: flaggedAll,
          true_positives: truePositives,
          precision: flaggedAll > 0 ? truePositives / flaggedAll : null,
          recall: hackingRollouts > 0 ? truePositives / hackingRollouts : null,
        }
      : null,
    rubric_version: {
      first: first?.rubric_version_scored ?? null,
      last: last?.rubric_version ?? last?.rubric_version_scored ?? null,
    },
    rubric_changes: reports.filter((report) => report.update?.changed).length,
    strategies,
    errors: reports.reduce((sum, report) => sum + report.errors, 0),
  }
}

/**
 * The closing summary in words.
 * @example console.log(formatSummary(result, summarize(result)))
 */
export function formatSummary(
  result: Pick<
    SimulationResult,
    'reports' | 'run_id' | 'seed' | 'steps' | 'rollouts_per_step' | 'duration_ms' | 'waited'
  >,
  summary: SimulationSummary,
): string {
  const f = (value: number | null) => (value === null ? 'n/a' : value.toFixed(2))
  const gap = (right: number | null, wrong: number | null) =>
    right === null || wrong === null ? 'n/a' : `${right >= wrong ? '+' : ''}${(right - wrong).toFixed(2)}`
  const strategies =
    Object.entries(summary.strategies)
      .map(([strategy, count]) => `${strategy} ×${count}`)
      .join(', ') || 'none'
  const detector = summary.hacking_detector
  const lines = [
    `Summary — run ${result.run_id ?? '?'}, ${plural(result.steps, 'step')} × ` +
      `${plural(result.rollouts_per_step, 'rollout')}, seed ${result.seed}, ` +
      `${(result.duration_ms / 1_000).toFixed(1)} s`,
    `  reward_hacking mean score: step ${summary.first_step} ${f(summary.hacking.first)} → step ${summary.last_step} ` +
      `${f(summary.hacking.last)}`,
    `  correct mean score:        step ${summary.first_step} ${f(summary.correct.first)} → step ${summary.last_step} ` +
      `${f(summary.correct.last)}`,
    `  correct − wrong gap:       step ${summary.first_step} ${gap(summary.correct.first, summary.wrong.first)} → ` +
      `step ${summary.last_step} ${gap(summary.correct.last, summary.wrong.last)} (right answers' lead over wrong)`,
    `  flagged as hacking: ${plural(summary.hacking_flags_total, 'rollout')} in all`,
    ...(detector ? [detectorLine(detector, summary.hacking_rollouts_flagged!.rollouts)] : []),
    `  rubric version ${summary.rubric_version.first ?? '?'} → ${summary.rubric_version.last ?? '?'}; ` +
      `${summary.rubric_changes} update(s) changed the rubrics; strategies: ${strategies}`,
  ]
  if (summary.errors > 0) lines.push(`  ${summary.errors} /score request(s) failed and were left out`)
  if (!result.waited) {
    const stale = result.reports.filter(
      (report, i) => i > 0 && (report.rubric_version_scored ?? 0) < (result.reports[i - 1]!.rubric_version ?? 0),
    ).length
    if (stale > 0)
      lines.push(
        `  --no-wait: the trainer ran ahead of the updates; ${stale} of ${result.reports.length - 1} later ` +
          `steps were ` +
          `scored on rubrics older than the previous step's update`,
      )
  }
  lines.push(verdictLine(summary))
  const padded = summary.verbose.last
  if (padded !== null && summary.correct.last !== null && padded >= summary.correct.last)
    lines.push(
      `  padding is rewarded: verbose answers (right, but padded) score ${f(padded)} against ` +
        `${f(summary.correct.last)} ` +
        'for concise right ones at the last step, and the updates do not fix it: they answer what the analyses flag ' +
        '(hacking), and none flagged padding. On the mock backend this is its heuristic, not a judgement: it grades ' +
        'overlap with the reference, the rubric and the prompt, and the padding restates the prompt. A real judge ' +
        '(docs/local-judge.md) reads length; an anchor such as "Is concise" tells it to.',
    )
  return lines.join('\n')
}

/**
 * What the scores say about evolution: it is credited only when the last step was scored on rubrics an update changed;
 * on the first step's rubrics, any difference is the judge's own grading.
 * @example verdictLine(summary) // '  verdict: the evolved rubrics penalise hacking — it scores 0.40 against …'
 */
function verdictLine(summary: SimulationSummary): string {
  const f = (value: number | null) => (value === null ? 'n/a' : value.toFixed(2))
  if (summary.hacking_penalised === null)
    return '  verdict: not enough reward_hacking rollouts to compare (use more steps or rollouts per step)'
  const scores =
    `${f(summary.hacking.last)} against ${f(summary.correct.last)} for correct answers at the last step ` +
    `(${f(summary.hacking.first)} at the first step)`
  if (!summary.scored_on_evolved_rubrics)
    return (
      `  verdict: no update changed the rubrics before the last step was scored (all on version ` +
      `${summary.rubric_version.first ?? '?'}), so nothing here is evolution's doing: hacking scores ${scores}, the ` +
      "judge's own grading (run more steps, or wait longer for slow updates: --wait-timeout)"
    )
  return summary.hacking_penalised
    ? `  verdict: the evolved rubrics penalise hacking — it scores ${scores}`
    : `  verdict: hacking is not penalised — it scores ${scores}`
}

/**
 * The hacking detector's precision and recall, each with the counts it comes from.
 * @example detectorLine({ flagged: 22, true_positives: 10, precision: 10 / 22, recall: 1 }, 10) // '  hacking
 *   detector: precision 0.45 (10 of the 22 flagged were reward_hacking), recall 1.00 (10 of the 10 …)'
 */
function detectorLine(detector: NonNullable<SimulationSummary['hacking_detector']>, hackingRollouts: number): string {
  const f = (value: number | null) => (value === null ? 'n/a' : value.toFixed(2))
  return (
    `  hacking detector: precision ${f(detector.precision)} (${detector.true_positives} of the ${detector.flagged} ` +
    `flagged were reward_hacking), recall ${f(detector.recall)} (${detector.true_positives} of the ` +
    `${hackingRollouts} reward_hacking rollouts flagged)`
  )
}
