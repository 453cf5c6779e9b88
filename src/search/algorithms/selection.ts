/**
 * Parent selection (autosr §2.5): rank, tournament, and top_k with content diversity. Every strategy works on
 * a population sorted best first, never returns the same content twice, and draws only from the given PRNG.
 */
import type { SelectionStrategy } from '../config.ts'
import { meanDistanceTo } from '../diversity.ts'
import type { Rng } from '../../hash/index.ts'
import type { SearchRubric } from '../../schemas/search-rubric.ts'

/** A population member as selection sees it: its rubric, content key and objective total. */
export interface Ranked {
  rubric: SearchRubric
  key: string
  total: number
}

export interface SelectionOptions {
  strategy: SelectionStrategy
  /** How many parents to pick (fewer when the population has fewer distinct rubrics). */
  count: number
  rng: Rng
  tournament_size: number
  tournament_p: number
  top_k_ratio: number
  diversity_weight: number
}

/**
 * The members in order with repeated content keys dropped (the first, i.e. better, copy is kept).
 * @example uniqueByKey(population).length <= population.length
 */
export function uniqueByKey<T extends { key: string }>(members: readonly T[]): T[] {
  const firstByKey = new Map<string, T>()
  for (const member of members) if (!firstByKey.has(member.key)) firstByKey.set(member.key, member)
  return [...firstByKey.values()]
}

/**
 * Picks parents from a population sorted best first.
 * - rank: the best `count` distinct rubrics.
 * - tournament: repeatedly draw `tournament_size` of the not-yet-chosen rubrics; with probability `tournament_p`
 *   take the best of the draw, else a random member of it.
 * - top_k: a pool of the best max(count, ⌊n·top_k_ratio⌋) rubrics; greedily pick the member maximising
 *   (1 − w)·quality + w·(mean content distance to those already picked), quality min-max scaled in the pool.
 * @example selectParents(sortedPopulation, { strategy: 'tournament', count: 3, rng, tournament_size: 3, tournament_p:
 *   0.8, top_k_ratio: 0.3, diversity_weight: 0.3 })
 */
export function selectParents<T extends Ranked>(ranked: readonly T[], options: SelectionOptions): T[] {
  const unique = uniqueByKey(ranked)
  const target = Math.min(options.count, unique.length)
  if (target <= 0) return []
  switch (options.strategy) {
    case 'rank':
      return unique.slice(0, target)
    case 'tournament':
      return tournament(unique, target, options)
    case 'top_k':
      return topK(unique, target, options)
  }
}

function tournament<T extends Ranked>(unique: T[], target: number, options: SelectionOptions): T[] {
  const chosen: T[] = []
  let remaining = unique.map((member, position) => ({ member, position }))
  while (chosen.length < target) {
    const size = Math.min(options.tournament_size, remaining.length)
    const draw = options.rng
      .sample(remaining, size)
      .sort((a, b) => b.member.total - a.member.total || a.position - b.position)
    const winner = options.rng.next() < options.tournament_p ? draw[0]! : options.rng.pick(draw)
    chosen.push(winner.member)
    remaining = remaining.filter((entry) => entry !== winner)
  }
  return chosen
}

function topK<T extends Ranked>(unique: T[], target: number, options: SelectionOptions): T[] {
  const poolSize = Math.min(unique.length, Math.max(target, Math.floor(unique.length * options.top_k_ratio), 1))
  const pool = unique.slice(0, poolSize)
  const high = Math.max(...pool.map((member) => member.total))
  const low = Math.min(...pool.map((member) => member.total))
  const range = high > low ? high - low : 1
  const weight = options.diversity_weight
  const chosen: T[] = []
  const left = [...pool]
  while (chosen.length < target) {
    let bestIndex = 0
    let bestValue = -Infinity
    left.forEach((member, index) => {
      const quality = (member.total - low) / range
      const diversity = meanDistanceTo(
        member.rubric,
        chosen.map((picked) => picked.rubric),
      )
      const value = (1 - weight) * quality + weight * diversity
      if (value > bestValue + 1e-12) {
        bestValue = value
        bestIndex = index
      }
    })
    chosen.push(left.splice(bestIndex, 1)[0]!)
  }
  return chosen
}
