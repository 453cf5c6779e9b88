/**
 * Diversity of rubrics on their CONTENT (fixes autosr §8.8, whose hex-digest distance was ≈ 0.94 for any two
 * distinct rubrics). A rubric becomes a weighted bag of word shingles (unigrams and bigrams of each criterion's
 * text and check points), each criterion carrying its normalised weight; the distance between two rubrics is
 * one minus the weighted Jaccard similarity of their bags: 0 for the same content, 1 for nothing in common.
 */
import type { SearchRubric } from '../schemas/search-rubric.ts'
import { mean } from '../stats/index.ts'

type Profile = Map<string, number>
const profiles = new WeakMap<SearchRubric, Profile>()

function words(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []
}

/**
 * A rubric's content profile: shingle → mass, summing to 1 (each criterion's mass is its normalised weight,
 * spread evenly over its shingles). Cached per rubric object.
 * @example contentProfile(rubric).get('factual accuracy') // the mass of that bigram
 */
function contentProfile(rubric: SearchRubric): ReadonlyMap<string, number> {
  let profile = profiles.get(rubric)
  if (profile) return profile
  profile = new Map()
  const total = rubric.criteria.reduce((sum, criterion) => sum + criterion.weight, 0)
  for (const criterion of rubric.criteria) {
    const weight = total > 0 ? criterion.weight / total : 1 / rubric.criteria.length
    if (weight === 0) continue
    const shingles: string[] = []
    for (const text of [criterion.text, ...criterion.check_points]) {
      const tokens = words(text)
      tokens.forEach((token, i) => {
        shingles.push(token)
        if (i + 1 < tokens.length) shingles.push(`${token} ${tokens[i + 1]}`)
      })
    }
    if (shingles.length === 0) shingles.push(`#${criterion.criterion_id}`)
    for (const shingle of shingles) profile.set(shingle, (profile.get(shingle) ?? 0) + weight / shingles.length)
  }
  profiles.set(rubric, profile)
  return profile
}

/**
 * 1 − weighted Jaccard similarity of two rubrics' content profiles, in [0, 1].
 * @example rubricDistance(rubric, { ...rubric, rubric_id: 'copy' }) // 0
 * @internal
 */
export function rubricDistance(a: SearchRubric, b: SearchRubric): number {
  if (a === b) return 0
  const pa = contentProfile(a)
  const pb = contentProfile(b)
  let shared = 0
  let union = 0
  for (const [shingle, mass] of pa) {
    const other = pb.get(shingle) ?? 0
    shared += Math.min(mass, other)
    union += Math.max(mass, other)
  }
  for (const [shingle, mass] of pb) if (!pa.has(shingle)) union += mass
  if (union <= 0) return 0
  // Rounded so that sums taken in a different order cannot tell equal contents apart.
  return Math.max(0, Math.min(1, Math.round((1 - shared / union) * 1e12) / 1e12))
}

/**
 * Mean pairwise content distance of a population (every pair; populations are small); 0 below two rubrics.
 * @example populationDiversity([rubric, rubric]) // 0
 */
export function populationDiversity(rubrics: readonly SearchRubric[]): number {
  if (rubrics.length < 2) return 0
  let sum = 0
  let pairs = 0
  for (let i = 0; i < rubrics.length; i++) {
    for (let j = i + 1; j < rubrics.length; j++) {
      sum += rubricDistance(rubrics[i]!, rubrics[j]!)
      pairs++
    }
  }
  return sum / pairs
}

/**
 * Mean distance of one rubric to a set (1 when the set is empty): how much it would add.
 * @example meanDistanceTo(candidate, alreadyPicked)
 */
export function meanDistanceTo(rubric: SearchRubric, others: readonly SearchRubric[]): number {
  return mean(others.map((other) => rubricDistance(rubric, other))) ?? 1
}
