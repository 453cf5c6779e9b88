import { groupBy } from '../collections/index.ts'
import { mean, median, populationStd } from '../stats/index.ts'
import { ANALYSIS_REASONS } from '../schemas/status.ts'
/** What the selection knows of one scored rollout of a closed step: small, so a whole step of them fits one read. */
export interface AnalysisCandidate {
  rollout_id: string
  /** The prompt the rollout answers (a hash of its input): a GRPO group is the rollouts of one prompt. */
  group: string
  score: number
  output_chars: number
  /** A hash of the output text: equal outputs to different prompts are a template. */
  output_hash: string
  /** Grade per rubric id. */
  grades: Record<string, number>
  /** Injection tactics the cheap check found when the rollout was scored. */
  tactics: string[]
}

export type AnalysisReason = (typeof ANALYSIS_REASONS)[number]

export interface AnalysisBudget {
  /** Rollouts analysed for coverage: each group's extremes, then the score range. */
  coverage: number
  /** Rollouts analysed because a cheap check marked them suspicious, on top of `coverage`. */
  suspicious: number
}

export interface SelectedRollout {
  rollout_id: string
  reasons: AnalysisReason[]
}

/** A high score: what reward hacking is after. */
const HIGH_SCORE = 0.8
/** An output shorter than this share of its group's median is "very short". */
const SHORT_SHARE = 0.2
/** The same output to at least this many rollouts of at least two prompts is a template. */
const TEMPLATE_COPIES = 3
/** A grade further than this many standard deviations from its rubric's mean in the step is unusual. */
const UNUSUAL_SIGMAS = 3
/** Grades a rubric needs in the step before its spread means anything. */
const MIN_GRADES_FOR_SPREAD = 8

/**
 * Which rollouts of a step get a deep analysis: every rollout a cheap check marks suspicious (up to
 * `budget.suspicious`), then, up to `budget.coverage`, the best and worst answer of the groups whose scores spread
 * most, then rollouts evenly spaced over the score range. Deterministic for the same candidates, so a retried step
 * update analyses the same rollouts.
 * @example selectForAnalysis(candidates, { coverage: 32, suspicious: 32 }) // [{ rollout_id: 'r7', reasons:
 *   ['injection'] }, …]
 */
export function selectForAnalysis(candidates: readonly AnalysisCandidate[], budget: AnalysisBudget): SelectedRollout[] {
  const ordered = [...candidates].sort((a, b) =>
    a.rollout_id < b.rollout_id ? -1 : a.rollout_id > b.rollout_id ? 1 : 0,
  )
  const reasons = suspicions(ordered)
  const scoreOf = new Map(ordered.map((candidate) => [candidate.rollout_id, candidate.score]))
  const suspicious = [...reasons.keys()]
    .map((id) => ({
      id,
      rank: Math.min(...reasons.get(id)!.map((reason) => ANALYSIS_REASONS.indexOf(reason))),
      score: scoreOf.get(id)!,
    }))
    .sort((a, b) => a.rank - b.rank || b.score - a.score || (a.id < b.id ? -1 : 1))
    .slice(0, budget.suspicious)
  const chosen = new Map<string, AnalysisReason[]>(suspicious.map(({ id }) => [id, reasons.get(id)!]))

  let coverage = budget.coverage
  const take = (candidate: AnalysisCandidate, reason: AnalysisReason) => {
    if (coverage <= 0) return
    const earlier = chosen.get(candidate.rollout_id)
    if (earlier) {
      if (!earlier.includes(reason)) earlier.push(reason)
      return
    }
    chosen.set(candidate.rollout_id, [reason])
    coverage--
  }
  const groups = [...groupBy(ordered, (candidate) => candidate.group).values()]
    .filter((members) => members.length >= 2)
    .map((members) => {
      const byScore = [...members].sort((a, b) => b.score - a.score)
      return { best: byScore[0]!, worst: byScore.at(-1)!, spread: byScore[0]!.score - byScore.at(-1)!.score }
    })
    .filter((group) => group.spread > 0)
    .sort((a, b) => b.spread - a.spread || (a.best.group < b.best.group ? -1 : 1))
  const extremesBudget = Math.ceil(budget.coverage / 2)
  for (const group of groups) {
    if (budget.coverage - coverage >= extremesBudget) break
    take(group.best, 'group_best')
    take(group.worst, 'group_worst')
  }
  const rest = ordered
    .filter((candidate) => !chosen.has(candidate.rollout_id))
    .sort((a, b) => a.score - b.score || (a.rollout_id < b.rollout_id ? -1 : 1))
  const slots = Math.min(coverage, rest.length)
  for (let slot = 0; slot < slots; slot++) take(rest[Math.floor(((slot + 0.5) * rest.length) / slots)]!, 'score_range')
  return [...chosen].map(([rollout_id, why]) => ({ rollout_id, reasons: why }))
}

/**
 * The reasons each suspicious rollout of a step is suspicious: injected instructions, a high score on a very
 * short or templated output, a criterion graded far from its usual range in the step.
 * @example suspicions(candidates).get('r7') // ['injection', 'short_high_score']
 */
function suspicions(candidates: readonly AnalysisCandidate[]): Map<string, AnalysisReason[]> {
  const found = new Map<string, AnalysisReason[]>()
  const note = (rolloutId: string, reason: AnalysisReason) => append(found, rolloutId, reason)
  const stepMedian = median(candidates.map((candidate) => candidate.output_chars)) ?? 0
  const groups = groupBy(candidates, (candidate) => candidate.group)
  const copies = groupBy(candidates, (candidate) => candidate.output_hash)
  const spreads = rubricSpreads(candidates)
  for (const candidate of candidates) {
    if (candidate.tactics.length > 0) note(candidate.rollout_id, 'injection')
    const group = groups.get(candidate.group)!
    const typical = group.length >= 4 ? (median(group.map((member) => member.output_chars)) ?? 0) : stepMedian
    if (candidate.score >= HIGH_SCORE && candidate.output_chars < SHORT_SHARE * typical)
      note(candidate.rollout_id, 'short_high_score')
    const same = copies.get(candidate.output_hash)!
    if (
      candidate.score >= HIGH_SCORE &&
      same.length >= TEMPLATE_COPIES &&
      new Set(same.map((copy) => copy.group)).size >= 2
    )
      note(candidate.rollout_id, 'templated')
    const unusual = Object.entries(candidate.grades).some(([rubricId, grade]) => {
      const spread = spreads.get(rubricId)
      return spread !== undefined && Math.abs(grade - spread.mean) > UNUSUAL_SIGMAS * spread.std
    })
    if (unusual) note(candidate.rollout_id, 'unusual_grade')
  }
  return found
}

function rubricSpreads(candidates: readonly AnalysisCandidate[]): Map<string, { mean: number; std: number }> {
  const grades = new Map<string, number[]>()
  for (const candidate of candidates) {
    for (const [rubricId, grade] of Object.entries(candidate.grades)) append(grades, rubricId, grade)
  }
  const spreads = new Map<string, { mean: number; std: number }>()
  for (const [rubricId, values] of grades) {
    if (values.length < MIN_GRADES_FOR_SPREAD) continue
    const std = populationStd(values) ?? 0
    if (std > 0) spreads.set(rubricId, { mean: mean(values) ?? 0, std })
  }
  return spreads
}

function append<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key)
  if (list) list.push(value)
  else map.set(key, [value])
}
