/**
 * Rubric score from per-criterion grades on the rubric's explicit scale 0..grade_max (fixes autosr §8.1:
 * no guessing whether a grade is on a 0–1 or 0–5 scale; a grade is always divided by grade_max).
 */
import type { CriterionGrades } from '../types.ts'
import type { SearchRubric } from '../../schemas/search-rubric.ts'
import { mean } from '../../stats/index.ts'

export interface RubricScore {
  /** Weight-normalised mean of grade/grade_max over the counted criteria, in [0, 1]. */
  score: number
  /** Criteria with a grade. */
  graded: number
  /** Criteria without one (null or missing): skipped when the protocol allows N/A, else counted as 0. */
  na: number
  /** No criterion has a grade: the score is 0 and carries no information about the candidate. */
  allNa: boolean
}

/**
 * The rubric score of one candidate: Σ wᵢ·gᵢ/G ÷ Σ wᵢ with weights normalised to sum 1 (uniform when they sum
 * to 0). A null or missing grade is N/A: skipped when `allow_na`, else counted as 0. An all-N/A rubric scores 0
 * and is flagged. Grades may be fractional (a mean of votes) but must lie in 0..grade_max.
 * @example
 * // weights 2:1, scale 0..5
 * rubricScore({ c1: 5, c2: 2 }, rubric).score // (2·1 + 1·0.4) / 3 = 0.8
 * rubricScore({ c1: null, c2: 4 }, rubric) // { score: 0.8, graded: 1, na: 1, allNa: false } with allow_na
 */
export function rubricScore(grades: CriterionGrades, rubric: SearchRubric): RubricScore {
  const gradeMax = rubric.grading_protocol.grade_max
  const allowNa = rubric.grading_protocol.allow_na
  const weights = normalisedWeights(rubric.criteria.map((criterion) => criterion.weight))
  let numerator = 0
  let denominator = 0
  let graded = 0
  rubric.criteria.forEach((criterion, index) => {
    const grade = grades[criterion.criterion_id]
    const weight = weights[index]!
    if (grade === null || grade === undefined) {
      if (!allowNa) denominator += weight
      return
    }
    if (!Number.isFinite(grade) || grade < 0 || grade > gradeMax) {
      throw new RangeError(`grade ${grade} for criterion "${criterion.criterion_id}" is outside 0..${gradeMax}`)
    }
    graded++
    numerator += weight * (grade / gradeMax)
    denominator += weight
  })
  const na = rubric.criteria.length - graded
  return { score: denominator > 0 ? numerator / denominator : 0, graded, na, allNa: graded === 0 }
}

/**
 * Weights scaled to sum 1; uniform when they sum to 0 or less (or are not finite).
 * @example normalisedWeights([2, 1, 1]) // [0.5, 0.25, 0.25]
 */
export function normalisedWeights(weights: readonly number[]): number[] {
  const total = weights.reduce((sum, weight) => sum + weight, 0)
  if (!(total > 0) || !Number.isFinite(total)) return weights.map(() => 1 / Math.max(1, weights.length))
  return weights.map((weight) => weight / total)
}

/**
 * Several votes' grades combined per criterion: the mean of the non-null grades, or null when every vote said N/A
 * (autosr §2.1; the score of the mean is `rubricScore` of the result).
 * @example meanGrades([{ c1: 4, c2: null }, { c1: 6, c2: null }], rubric) // { c1: 5, c2: null }
 */
export function meanGrades(votes: readonly CriterionGrades[], rubric: SearchRubric): CriterionGrades {
  const out: CriterionGrades = {}
  for (const criterion of rubric.criteria) {
    const values = votes
      .map((vote) => vote[criterion.criterion_id])
      .filter((grade): grade is number => typeof grade === 'number')
    out[criterion.criterion_id] = mean(values)
  }
  return out
}
