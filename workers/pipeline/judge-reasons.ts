import type { RecordedRollout } from '../../durable-objects/contracts.ts'
import type { RunConfig } from '../../src/schemas/run-config.ts'
import type { Rubric } from '../../src/schemas/rubric.ts'
import type { CriterionGrade } from '../../src/schemas/score.ts'
import type { RoleModel } from '../scoring/models.ts'
import { judgeRecorded } from './recorded.ts'

/**
 * A recorded rollout's grades with the judge's reasons, for its analysis. A run that scores without reasons
 * (`reasons: none`) asks the scorer once more, with short reasons, for just the few rollouts it analyses: the grades
 * stay the recorded ones (the reward the trainer got), the reasons come from the second call. When that call fails the
 * analysis goes on without reasons.
 * @example const criteria = await criteriaWithReasons(config, () => models.forRole('scorer'), recorded, rubrics)
 */
export async function criteriaWithReasons(
  config: RunConfig,
  scorerModel: () => Pick<RoleModel, 'model' | 'settings'>,
  recorded: RecordedRollout,
  rubrics: Rubric[],
): Promise<CriterionGrade[]> {
  const criteria = recorded.entry.criteria
  if (config.reasons !== 'none' || criteria.some((grade) => grade.reason)) return criteria
  try {
    const judged = await judgeRecorded(scorerModel(), config, recorded, rubrics, 'short')
    const reasons = new Map(judged.criteria.map((grade) => [grade.rubric_id, grade.reason]))
    return criteria.map((grade) => {
      const reason = reasons.get(grade.rubric_id)
      return reason ? { ...grade, reason } : grade
    })
  } catch (error) {
    console.warn(`reasons for the analysis of ${recorded.entry.rollout_id} could not be asked for:`, error)
    return criteria
  }
}
