/**
 * A count with its noun, singular for one: what people read in summaries and pages.
 * @example plural(1, 'step') // '1 step'; plural(3, 'rollout') // '3 rollouts'
 */
export function plural(count: number, noun: string, pluralNoun = `${noun}s`): string {
  return `${count} ${count === 1 ? noun : pluralNoun}`
}

/**
 * The candidate a misspelt name most likely meant: the nearest by edit distance, if it is within a typo's reach
 * (at most 2 edits, or a quarter of the name's length for long names).
 * @example nearestName('rollout_per_step', ['mode', 'rollouts_per_step']) // 'rollouts_per_step'
 */
export function nearestName(name: string, candidates: readonly string[]): string | undefined {
  let best: { candidate: string; distance: number } | undefined
  for (const candidate of candidates) {
    const distance = editDistance(name, candidate)
    if (!best || distance < best.distance) best = { candidate, distance }
  }
  return best && best.distance <= Math.max(2, Math.floor(name.length / 4)) ? best.candidate : undefined
}

/**
 * Levenshtein distance: the fewest single-character insertions, deletions and substitutions from `a` to `b`.
 * @example editDistance('rubric_stats', 'rubrics/stats') // 2
 */
export function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++)
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1))
    previous = current
  }
  return previous[b.length]!
}
