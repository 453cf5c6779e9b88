import type { CriterionGrade } from '../schemas/score.ts'

/**
 * The reward, in [0, 1]: the weight-normalised mean of the criteria's grades on the explicit 0..gradeMax scale (a
 * verdict's probability in place of its rounded grade),
 * multiplied by one minus the weight-normalised mean of the penalty grades. A response that does none of the penalised
 * things keeps its reward; one that fully does every one scores 0; a run with penalties only starts from 1.
 * Every criterion must carry a grade; there is no silent "missing means 0".
 * @example
 * rewardFromGrades([{ rubric_id: 'a', grade: 10, weight: 2 }, { rubric_id: 'b', grade: 5, weight: 1 }], 10) // 0.8333…
 * rewardFromGrades([{ grade: 8, weight: 1 }, { grade: 5, weight: 1, penalty: true }], 10) // 0.8 × (1 − 0.5) = 0.4
 */
export function rewardFromGrades(
  grades: readonly Pick<CriterionGrade, 'grade' | 'weight' | 'penalty' | 'probability'>[],
  gradeMax: number,
): number {
  if (grades.length === 0) throw new RangeError('a reward needs at least one graded criterion')
  for (const { grade, probability } of grades) {
    if (!Number.isInteger(grade) || grade < 0 || grade > gradeMax) {
      throw new RangeError(`grade ${grade} is outside the scale 0..${gradeMax}`)
    }
    if (probability !== undefined && !(probability >= 0 && probability <= 1))
      throw new RangeError(`probability ${probability} is outside 0..1`)
  }
  const criteria = grades.filter((entry) => !entry.penalty)
  const penalties = grades.filter((entry) => entry.penalty)
  const reward = criteria.length > 0 ? weightedShare(criteria, gradeMax) : 1
  return penalties.length > 0 ? reward * (1 - weightedShare(penalties, gradeMax)) : reward
}

/** A verdict counts as its probability's point on the scale, unrounded. */
function weightedShare(
  grades: readonly Pick<CriterionGrade, 'grade' | 'weight' | 'probability'>[],
  gradeMax: number,
): number {
  let weighted = 0
  let totalWeight = 0
  for (const { grade, weight, probability } of grades) {
    weighted += weight * (probability === undefined ? grade : probability * gradeMax)
    totalWeight += weight
  }
  return weighted / (totalWeight * gradeMax)
}
