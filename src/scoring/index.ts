import type { CriterionGrade } from '../schemas/score.ts'

/**
 * The reward: weight-normalised mean of grades on the explicit 0..gradeMax scale, in [0, 1].
 * Every criterion must carry a grade; there is no silent "missing means 0".
 * @example rewardFromGrades([{ rubric_id: 'a', grade: 10, weight: 2 }, { rubric_id: 'b', grade: 5, weight: 1 }], 10) //
 *   0.8333…
 */
export function rewardFromGrades(
  grades: readonly Pick<CriterionGrade, 'grade' | 'weight'>[],
  gradeMax: number,
): number {
  if (grades.length === 0) throw new RangeError('a reward needs at least one graded criterion')
  let weighted = 0
  let totalWeight = 0
  for (const { grade, weight } of grades) {
    if (!Number.isInteger(grade) || grade < 0 || grade > gradeMax) {
      throw new RangeError(`grade ${grade} is outside the scale 0..${gradeMax}`)
    }
    weighted += weight * grade
    totalWeight += weight
  }
  return weighted / (totalWeight * gradeMax)
}
