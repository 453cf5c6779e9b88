/**
 * Benchmark metrics for scalar reward models (pure: no I/O). Ground truth comes from candidate labels
 * (`rank`, 1 = best, or `quality`, higher = better); scores come from a scorer, or a failure per candidate.
 * - pairwise accuracy over 2-candidate items, in both presentation orders (A/B and B/A), plus swap-consistent
 *   accuracy (correct in both orders; a tie is never swap-consistent);
 * - K-way accuracy over items with more than 2 candidates (the top-ranked candidate must score strictly highest);
 * - tail accuracy: pairs among the top 25% (at least 2) of ranked items with more than 2 candidates;
 * - Wilson 95% intervals, and a seeded percentile bootstrap over items;
 * - failures (a scorer error on any candidate an item needs) counted and reported apart, never as ties.
 */

import { seededRandom } from '../hash/index.ts'
import { quantile } from '../stats/index.ts'
import type { BenchAccuracy, BenchMetrics, TiePolicy } from '../schemas/bench-report.ts'

export type { BenchMetrics, TiePolicy }
/** An accuracy with its counts and Wilson 95% interval (the bench report's shape). */
export type Accuracy = BenchAccuracy

/**
 * One candidate as the metrics see it: its ground truth and what the scorer gave.
 * @internal
 */
export interface ScoredCandidate {
  candidate_id: string
  /** Higher is better: `-rank` or `quality`; undefined when the candidate has no label. */
  truth: number | undefined
  /** The scalar score, or null when the scorer failed on this candidate (see `error`). */
  score: number | null
  error?: string
}

/** One benchmark item (a prompt with its candidates, in dataset order = presentation order A, B, …). */
export interface ScoredItem {
  item_id: string
  group: string
  candidates: ScoredCandidate[]
  /** Optional scores of the same candidates presented in reverse order (B/A); defaults to `candidates`' scores. */
  reversed?: ScoredCandidate[]
}

/**
 * The outcome of one comparison.
 * @internal
 */
export type Outcome = 'correct' | 'wrong' | 'tie' | 'failure'

/**
 * The Wilson score interval of `successes` out of `n` (successes may be fractional, e.g. half ties).
 * @example wilsonInterval(8, 10) // [0.4902, 0.9433] (rounded)
 * @example wilsonInterval(0, 0) // null
 * @internal
 */
export function wilsonInterval(successes: number, n: number, z = 1.959963984540054): [number, number] | null {
  if (n <= 0) return null
  const p = successes / n
  const z2 = z * z
  const denominator = 1 + z2 / n
  const centre = (p + z2 / (2 * n)) / denominator
  const half = (z * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n))) / denominator
  // At p = 0 or 1 the bound is exactly 0 or 1 (floating point would give 1e-17 off).
  return [successes <= 0 ? 0 : Math.max(0, centre - half), successes >= n ? 1 : Math.min(1, centre + half)]
}

/**
 * Ground truth of a label as one number, higher = better: `-rank` when ranked, else `quality`.
 * @example truthOf({ rank: 1 }) // -1
 * @example truthOf({ quality: 0.7 }) // 0.7
 */
export function truthOf(label: { rank?: number | undefined; quality?: number | undefined }): number | undefined {
  if (label.rank !== undefined) return -label.rank
  return label.quality
}

/**
 * Compares the scores of a better and a worse candidate.
 * @example compareScores({ score: 0.9 }, { score: 0.2 }) // 'correct'
 * @example compareScores({ score: 0.5 }, { score: null }) // 'failure'
 * @internal
 */
export function compareScores(better: Pick<ScoredCandidate, 'score'>, worse: Pick<ScoredCandidate, 'score'>): Outcome {
  if (better.score === null || worse.score === null || !Number.isFinite(better.score) || !Number.isFinite(worse.score))
    return 'failure'
  if (better.score > worse.score) return 'correct'
  if (better.score === worse.score) return 'tie'
  return 'wrong'
}

/**
 * An accuracy from outcomes: failures are excluded from n and reported, ties count per `ties`.
 * @example accuracyOf(['correct', 'tie', 'wrong', 'failure'], 'half').accuracy // 0.5
 * @internal
 */
export function accuracyOf(outcomes: readonly Outcome[], ties: TiePolicy): Accuracy {
  const count = (kind: Outcome) => outcomes.filter((outcome) => outcome === kind).length
  const correct = count('correct')
  const wrong = count('wrong')
  const tieCount = count('tie')
  const failures = count('failure')
  const n = correct + wrong + tieCount
  const successes = correct + (ties === 'half' ? tieCount / 2 : 0)
  return {
    n,
    correct,
    wrong,
    ties: tieCount,
    failures,
    accuracy: n > 0 ? successes / n : null,
    ci95: wilsonInterval(successes, n),
  }
}

/** The credit of one outcome (null for a failure). */
function _credit(outcome: Outcome, ties: TiePolicy): number | null {
  if (outcome === 'failure') return null
  return outcome === 'correct' ? 1 : outcome === 'tie' && ties === 'half' ? 0.5 : 0
}

/** The better and worse candidate of a 2-candidate item, or undefined when the labels do not order them. */
function orderedPair(candidates: readonly ScoredCandidate[]): { better: number; worse: number } | undefined {
  const [a, b] = candidates
  if (!a || !b || a.truth === undefined || b.truth === undefined || a.truth === b.truth) return undefined
  return a.truth > b.truth ? { better: 0, worse: 1 } : { better: 1, worse: 0 }
}

/**
 * Outcomes of one 2-candidate item in both presentation orders.
 * @internal
 */
export interface PairOutcome {
  item_id: string
  group: string
  ab: Outcome
  ba: Outcome
  /** Correct in both orders (a failure in either order is a failure). */
  swap: Outcome
}

/**
 * Both-order outcomes of a 2-candidate item (undefined when it is not one, or its labels do not order it).
 * The A/B order uses `candidates`; B/A uses `reversed` when given (scores of the reversed presentation), else the same
 * scores.
 * @example pairOutcome({ item_id: 'p', group: 'g', candidates: [{ candidate_id: 'a', truth: -1, score: 1 }, {
 *   candidate_id: 'b', truth: -2, score: 1 }] })?.swap // 'wrong' (a tie is never swap-consistent)
 * @internal
 */
export function pairOutcome(item: ScoredItem): PairOutcome | undefined {
  if (item.candidates.length !== 2) return undefined
  const order = orderedPair(item.candidates)
  if (!order) return undefined
  const forward = item.candidates
  const reverse = item.reversed ?? item.candidates
  const ab = compareScores(forward[order.better]!, forward[order.worse]!)
  const ba = compareScores(reverse[order.better]!, reverse[order.worse]!)
  const swap: Outcome =
    ab === 'failure' || ba === 'failure' ? 'failure' : ab === 'correct' && ba === 'correct' ? 'correct' : 'wrong'
  return { item_id: item.item_id, group: item.group, ab, ba, swap }
}

/**
 * K-way outcome of an item with more than 2 candidates: correct when the (unique) top-labelled candidate scores
 * strictly highest; a tie when it shares the highest score; undefined when the item has ≤ 2 candidates or no unique top
 * label. Any candidate's failure makes the item a failure.
 * @example kWayOutcome({ item_id: 'p', group: 'g', candidates: [{ candidate_id: 'a', truth: -1, score: 0.9 }, {
 *   candidate_id: 'b', truth: -2, score: 0.5 }, { candidate_id: 'c', truth: -3, score: 0.1 }] }) // 'correct'
 * @internal
 */
export function kWayOutcome(item: ScoredItem): Outcome | undefined {
  if (item.candidates.length <= 2) return undefined
  const labelled = item.candidates.filter((candidate) => candidate.truth !== undefined)
  if (labelled.length !== item.candidates.length) return undefined
  const bestTruth = Math.max(...labelled.map((candidate) => candidate.truth!))
  const tops = labelled.filter((candidate) => candidate.truth === bestTruth)
  if (tops.length !== 1) return undefined
  if (item.candidates.some((candidate) => candidate.score === null || !Number.isFinite(candidate.score)))
    return 'failure'
  const top = tops[0]!
  const others = item.candidates.filter((candidate) => candidate !== top).map((candidate) => candidate.score!)
  const highestOther = Math.max(...others)
  if (top.score! > highestOther) return 'correct'
  if (top.score! === highestOther) return 'tie'
  return 'wrong'
}

/**
 * Outcomes of every labelled-ordered pair among the top 25% (by label, at least 2) of an item with more than 2
 * candidates.
 * @example tailOutcomes(item4).length // 1: the top 25% of 4 candidates is 2 candidates, one pair
 * @internal
 */
export function tailOutcomes(item: ScoredItem, share = 0.25): Outcome[] {
  if (item.candidates.length <= 2 || item.candidates.some((candidate) => candidate.truth === undefined)) return []
  const size = Math.max(2, Math.ceil(item.candidates.length * share))
  const top = [...item.candidates].sort((a, b) => b.truth! - a.truth!).slice(0, size)
  return pairsOf(top)
}

/**
 * Outcomes of every pair of candidates whose labels differ.
 * @example pairsOf([{ candidate_id: 'a', truth: 2, score: 1 }, { candidate_id: 'b', truth: 1, score: 0 }]) //
 *   ['correct']
 */
function pairsOf(candidates: readonly ScoredCandidate[]): Outcome[] {
  const outcomes: Outcome[] = []
  for (let i = 0; i < candidates.length; i++) {
    for (let j = i + 1; j < candidates.length; j++) {
      const a = candidates[i]!
      const b = candidates[j]!
      if (a.truth === undefined || b.truth === undefined || a.truth === b.truth) continue
      outcomes.push(a.truth > b.truth ? compareScores(a, b) : compareScores(b, a))
    }
  }
  return outcomes
}

/** Options of `benchMetrics`. */
export interface BenchMetricOptions {
  ties?: TiePolicy
  /** Bootstrap resamples (over items) for percentile intervals; 0 = none. */
  bootstrap?: number
  seed?: number
}

/**
 * Every metric over `items` (see the module comment). With `bootstrap > 0`, every accuracy also gets a seeded
 * percentile 95% interval from resampling items with replacement.
 * @example
 * const metrics = benchMetrics(items, { ties: 'half' })
 * metrics.pairwise?.ab.accuracy // e.g. 0.75
 */
export function benchMetrics(items: readonly ScoredItem[], options: BenchMetricOptions = {}): BenchMetrics {
  const ties = options.ties ?? 'half'
  const per = items.map((item) => itemOutcomes(item))
  const metrics = summarise(per, ties)
  const resamples = options.bootstrap ?? 0
  if (resamples > 0 && per.length > 0) {
    const random = seededRandom(options.seed ?? 0)
    const draws: Record<string, number[]> = {}
    for (let r = 0; r < resamples; r++) {
      const sample = per.map(() => per[Math.floor(random() * per.length)]!)
      const m = summarise(sample, ties)
      for (const [key, accuracy] of accuracies(m))
        if (accuracy.accuracy !== null) (draws[key] ??= []).push(accuracy.accuracy)
    }
    for (const [key, accuracy] of accuracies(metrics)) {
      const values = draws[key] ?? []
      const low = quantile(values, 0.025)
      const high = quantile(values, 0.975)
      accuracy.bootstrap95 = low === null || high === null ? null : [low, high]
    }
  }
  return metrics
}

/**
 * Metrics per group (the item's `group`), in group-name order.
 * @example Object.keys(metricsByGroup(items)) // ['adversarial', 'natural']
 */
export function metricsByGroup(
  items: readonly ScoredItem[],
  options: BenchMetricOptions = {},
): Record<string, BenchMetrics> {
  const groups = new Map<string, ScoredItem[]>()
  for (const item of items) {
    const list = groups.get(item.group) ?? []
    list.push(item)
    groups.set(item.group, list)
  }
  const out: Record<string, BenchMetrics> = {}
  for (const group of [...groups.keys()].sort()) out[group] = benchMetrics(groups.get(group)!, options)
  return out
}

interface ItemOutcomes {
  pair?: PairOutcome
  kway?: Outcome
  pairs: Outcome[]
  tail: Outcome[]
  failed: boolean
}

function itemOutcomes(item: ScoredItem): ItemOutcomes {
  const pair = pairOutcome(item)
  const kway = kWayOutcome(item)
  const pairs = item.candidates.length > 2 ? pairsOf(item.candidates) : []
  const tail = tailOutcomes(item)
  const failed =
    item.candidates.some((candidate) => candidate.score === null) ||
    (item.reversed ?? []).some((candidate) => candidate.score === null)
  return { ...(pair ? { pair } : {}), ...(kway ? { kway } : {}), pairs, tail, failed }
}

function summarise(per: readonly ItemOutcomes[], ties: TiePolicy): BenchMetrics {
  const pairs = per.flatMap((entry) => (entry.pair ? [entry.pair] : []))
  const kway = per.flatMap((entry) => (entry.kway ? [entry.kway] : []))
  const within = per.flatMap((entry) => entry.pairs)
  const tail = per.flatMap((entry) => entry.tail)
  return {
    items: per.length,
    failed_items: per.filter((entry) => entry.failed).length,
    pairwise: pairs.length
      ? {
          ab: accuracyOf(
            pairs.map((pair) => pair.ab),
            ties,
          ),
          ba: accuracyOf(
            pairs.map((pair) => pair.ba),
            ties,
          ),
          swap_consistent: accuracyOf(
            pairs.map((pair) => pair.swap),
            ties,
          ),
        }
      : null,
    kway: kway.length ? accuracyOf(kway, ties) : null,
    pairs_within_kway: within.length ? accuracyOf(within, ties) : null,
    tail: tail.length ? accuracyOf(tail, ties) : null,
  }
}

function accuracies(metrics: BenchMetrics): Array<[string, Accuracy]> {
  const out: Array<[string, Accuracy]> = []
  if (metrics.pairwise)
    out.push(['ab', metrics.pairwise.ab], ['ba', metrics.pairwise.ba], ['swap', metrics.pairwise.swap_consistent])
  if (metrics.kway) out.push(['kway', metrics.kway])
  if (metrics.pairs_within_kway) out.push(['within', metrics.pairs_within_kway])
  if (metrics.tail) out.push(['tail', metrics.tail])
  return out
}
