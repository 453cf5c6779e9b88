/** Number of equal-width score bins a step keeps for its histogram. */
const SCORE_BINS = 10

/** Scores of a step (in one ledger shard, or summed over shards): enough for counts, means, ranges and histograms. */
export interface ScoreTally {
  rollouts: number
  score_sum: number
  score_min: number | null
  score_max: number | null
  bins: number[]
  min_version: number | null
  max_version: number | null
  /**
   * The longest time one rollout of the step took from its request's arrival to its record, in ms (its judgement,
   * mostly): how long a rollout may still be in flight after the last one was recorded. Absent: none measured.
   */
  longest_judgement_ms?: number
}

/**
 * A tally of no scores.
 * @example emptyTally().rollouts // 0
 */
export function emptyTally(): ScoreTally {
  return {
    rollouts: 0,
    score_sum: 0,
    score_min: null,
    score_max: null,
    bins: new Array(SCORE_BINS).fill(0),
    min_version: null,
    max_version: null,
  }
}

/**
 * Counts one score, scored on rubric version `version` in `judgedInMs` (0: not measured), into `tally` (in place).
 * @example const tally = emptyTally(); addScore(tally, 0.8, 1, 1_500); tally.bins[8] // 1
 */
export function addScore(tally: ScoreTally, score: number, version: number, judgedInMs = 0): void {
  tally.rollouts++
  tally.score_sum += score
  tally.score_min = tally.score_min === null ? score : Math.min(tally.score_min, score)
  tally.score_max = tally.score_max === null ? score : Math.max(tally.score_max, score)
  tally.bins[Math.min(SCORE_BINS - 1, Math.max(0, Math.floor(score * SCORE_BINS)))]!++
  tally.min_version = tally.min_version === null ? version : Math.min(tally.min_version, version)
  tally.max_version = tally.max_version === null ? version : Math.max(tally.max_version, version)
  if (judgedInMs > 0) tally.longest_judgement_ms = Math.max(tally.longest_judgement_ms ?? 0, judgedInMs)
}

/**
 * The tally of several disjoint sets of scores (a step's shards).
 * @example mergeTallies([a, b]).rollouts === a.rollouts + b.rollouts
 */
export function mergeTallies(tallies: readonly ScoreTally[]): ScoreTally {
  const merged = emptyTally()
  for (const tally of tallies) {
    merged.rollouts += tally.rollouts
    merged.score_sum += tally.score_sum
    merged.score_min = minOf(merged.score_min, tally.score_min)
    merged.score_max = maxOf(merged.score_max, tally.score_max)
    for (const [bin, count] of tally.bins.entries()) merged.bins[bin]! += count
    merged.min_version = minOf(merged.min_version, tally.min_version)
    merged.max_version = maxOf(merged.max_version, tally.max_version)
    const longest = maxOf(merged.longest_judgement_ms ?? null, tally.longest_judgement_ms ?? null)
    if (longest !== null) merged.longest_judgement_ms = longest
  }
  return merged
}

function minOf(a: number | null, b: number | null): number | null {
  return a === null ? b : b === null ? a : Math.min(a, b)
}

function maxOf(a: number | null, b: number | null): number | null {
  return a === null ? b : b === null ? a : Math.max(a, b)
}
