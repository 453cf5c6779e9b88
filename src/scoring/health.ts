/**
 * Whether each criterion still separates the responses a trainer compares. GRPO only uses differences within a
 * group (the responses to one prompt), so a criterion that grades every response of a group alike adds no signal,
 * however sensible its text. Grades are read on the 0..1 scale (grade ÷ grade_max).
 */
import { correlation, mean } from '../stats/index.ts'

/** One criterion's health over one step of one instance. */
export interface CriterionStepHealth {
  rubric_id: string
  /** Mean grade on the 0..1 scale. */
  mean: number
  /** Pooled standard deviation of grades within groups of two or more responses; null when no group has two. */
  within_group_std: number | null
  /** Share of grades at the scale's top (saturated high) and at 0 (saturated low). */
  share_max: number
  share_min: number
  /** Pearson correlation of the grade with the rollout's final score; null when either does not vary. */
  corr_with_score: number | null
  /** Graded rollouts. */
  n: number
}

/** What a step's health is computed from: one scored rollout. */
export interface GradedRollout {
  /** The group it is compared within (responses to the same input). */
  group: string
  score: number
  grades: Record<string, number>
}

/**
 * Each criterion's health over the rollouts of one step, in order of first appearance.
 * @example
 * criterionHealth([{ group: 'q1', score: 0.9, grades: { a: 10 } }, { group: 'q1', score: 0.2, grades: { a: 2 } }], 10)
 * // [{ rubric_id: 'a', mean: 0.6, within_group_std: 0.5657, share_max: 0.5, share_min: 0, corr_with_score: 1, n: 2 }]
 */
export function criterionHealth(rollouts: readonly GradedRollout[], gradeMax: number): CriterionStepHealth[] {
  const byCriterion = new Map<string, { grades: number[]; scores: number[]; groups: Map<string, number[]> }>()
  for (const rollout of rollouts) {
    for (const [rubricId, grade] of Object.entries(rollout.grades)) {
      let entry = byCriterion.get(rubricId)
      if (!entry) byCriterion.set(rubricId, (entry = { grades: [], scores: [], groups: new Map() }))
      const value = grade / gradeMax
      entry.grades.push(value)
      entry.scores.push(rollout.score)
      const group = entry.groups.get(rollout.group)
      if (group) group.push(value)
      else entry.groups.set(rollout.group, [value])
    }
  }
  return [...byCriterion].map(([rubricId, { grades, scores, groups }]) => ({
    rubric_id: rubricId,
    mean: mean(grades)!,
    within_group_std: pooledWithinGroupStd([...groups.values()]),
    share_max: grades.filter((grade) => grade >= 1).length / grades.length,
    share_min: grades.filter((grade) => grade <= 0).length / grades.length,
    corr_with_score: correlation(grades, scores),
    n: grades.length,
  }))
}

/**
 * The within-group standard deviation pooled over groups of two or more: √(Σ squared deviations from each group's
 * mean ÷ Σ (group size − 1)).
 * @example pooledWithinGroupStd([[1, 1], [0, 1]]) // 0.7071…
 * @internal
 */
export function pooledWithinGroupStd(groups: readonly number[][]): number | null {
  let squares = 0
  let freedom = 0
  for (const group of groups) {
    if (group.length < 2) continue
    const centre = mean(group)!
    for (const value of group) squares += (value - centre) ** 2
    freedom += group.length - 1
  }
  return freedom === 0 ? null : Math.sqrt(squares / freedom)
}

/** When an adaptive criterion counts as dead, and how many adaptive criteria may be active. */
export interface RetirementPolicy {
  /** Consecutive steps below `minSpread` that retire a criterion; null: never. */
  retireAfterSteps: number | null
  /** The within-group standard deviation (0..1 scale) below which a step shows no separation. */
  minSpread: number
  /** Most adaptive criteria in force; the least discriminating go first. null: no cap. */
  maxActive: number | null
}

/** A criterion to drop from the adaptive set, and why (kept in the version's history). */
export interface Retirement {
  rubric_id: string
  reason: string
}

/**
 * The adaptive criteria to retire: those whose within-group spread stayed below the threshold for the last
 * `retireAfterSteps` steps (newest step last in `history`), then, above `maxActive`, the least discriminating by their
 * newest spread (criteria without a measurement yet are kept). Anchors are never retired.
 * @example
 * retirements([{ id: 'a', is_anchor: false }], [[{ rubric_id: 'a', within_group_std: 0 }]],
 *   { retireAfterSteps: 1, minSpread: 0.02, maxActive: null }) // [{ rubric_id: 'a', reason: '…' }]
 */
export function retirements(
  rubrics: readonly { id: string; is_anchor: boolean }[],
  history: readonly (readonly Pick<CriterionStepHealth, 'rubric_id' | 'within_group_std'>[])[],
  policy: RetirementPolicy,
): Retirement[] {
  const spreadAt = (steps: number, rubricId: string) =>
    history.at(-steps)?.find((entry) => entry.rubric_id === rubricId)?.within_group_std ?? null
  const adaptive = rubrics.filter((rubric) => !rubric.is_anchor)
  const retired: Retirement[] = []
  const { retireAfterSteps, minSpread, maxActive } = policy
  if (retireAfterSteps !== null && history.length >= retireAfterSteps) {
    for (const rubric of adaptive) {
      const spreads = Array.from({ length: retireAfterSteps }, (_, index) => spreadAt(index + 1, rubric.id))
      if (spreads.every((spread) => spread !== null && spread < minSpread))
        retired.push({
          rubric_id: rubric.id,
          reason:
            `within-group spread below ${minSpread} for ${retireAfterSteps} consecutive step` +
            `${retireAfterSteps === 1 ? '' : 's'} (last ${spreads[0]!.toFixed(3)}): it no longer separates responses`,
        })
    }
  }
  const remaining = adaptive.filter((rubric) => !retired.some((entry) => entry.rubric_id === rubric.id))
  if (maxActive !== null && remaining.length > maxActive) {
    const measured = remaining
      .map((rubric) => ({ rubric, spread: spreadAt(1, rubric.id) }))
      .filter((entry): entry is { rubric: (typeof remaining)[number]; spread: number } => entry.spread !== null)
      .sort((a, b) => a.spread - b.spread)
    for (const { rubric, spread } of measured.slice(0, remaining.length - maxActive))
      retired.push({
        rubric_id: rubric.id,
        reason:
          `over max_active_rubrics ${maxActive}: ` +
          `the least discriminating (within-group spread ${spread.toFixed(3)})`,
      })
  }
  // A run always keeps one criterion to grade by.
  if (retired.length >= rubrics.length) retired.pop()
  return retired
}
