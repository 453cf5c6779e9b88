import { describe, expect, it } from 'vitest'
import { criterionHealth, pooledWithinGroupStd, retirements } from '../../src/scoring/health.ts'

const rubric = (id: string, is_anchor = false) => ({ id, is_anchor })
const spreadOf = (rubric_id: string, within_group_std: number | null) => ({ rubric_id, within_group_std })

describe('criterion health of a step', () => {
  it('measures spread within groups, not across them: a criterion that only tracks the prompt has spread 0', () => {
    // "easy" grades 10 on group a and 0 on group b: very different means, but alike within each group.
    const rollouts = [
      { group: 'a', score: 0.9, grades: { easy: 10, split: 10 } },
      { group: 'a', score: 0.3, grades: { easy: 10, split: 2 } },
      { group: 'b', score: 0.7, grades: { easy: 0, split: 8 } },
      { group: 'b', score: 0.1, grades: { easy: 0, split: 0 } },
    ]
    const [easy, split] = criterionHealth(rollouts, 10)
    expect(easy).toMatchObject({
      rubric_id: 'easy',
      mean: 0.5,
      within_group_std: 0,
      share_max: 0.5,
      share_min: 0.5,
      n: 4,
    })
    // Deviations from each group's mean: ±0.4 and ±0.4 over 2 degrees of freedom.
    expect(split!.within_group_std).toBeCloseTo(Math.sqrt((4 * 0.16) / 2), 10)
    expect(split!.corr_with_score).toBeCloseTo(0.52 / Math.sqrt(0.68 * 0.4), 10)
    expect(split).toMatchObject({ share_max: 0.25, share_min: 0.25 })
  })

  it('has no spread without a group of two and no correlation when either side is constant', () => {
    const [single] = criterionHealth([{ group: 'a', score: 0.5, grades: { c: 4 } }], 10)
    expect(single).toMatchObject({ within_group_std: null, corr_with_score: null, n: 1 })
    const [flat] = criterionHealth(
      [
        { group: 'a', score: 0.2, grades: { c: 7 } },
        { group: 'a', score: 0.8, grades: { c: 7 } },
      ],
      10,
    )
    expect(flat).toMatchObject({ within_group_std: 0, corr_with_score: null, mean: 0.7 })
    expect(pooledWithinGroupStd([[1], [0.5]])).toBeNull()
  })
})

describe('retiring dead criteria', () => {
  const policy = { retireAfterSteps: 3, minSpread: 0.02, maxActive: null }

  it('retires an adaptive criterion only after retire_after_steps steps in a row below the threshold', () => {
    const rubrics = [rubric('anchor', true), rubric('dead'), rubric('alive'), rubric('recovered')]
    const steps = [
      [spreadOf('anchor', 0), spreadOf('dead', 0.01), spreadOf('alive', 0.3), spreadOf('recovered', 0)],
      [spreadOf('anchor', 0), spreadOf('dead', 0), spreadOf('alive', 0.01), spreadOf('recovered', 0.2)],
      [spreadOf('anchor', 0), spreadOf('dead', 0.019), spreadOf('alive', 0.01), spreadOf('recovered', 0)],
    ]
    const retired = retirements(rubrics, steps, policy)
    expect(retired.map((entry) => entry.rubric_id)).toEqual(['dead'])
    expect(retired[0]!.reason).toMatch(/below 0\.02 for 3 consecutive steps \(last 0\.019\)/)
    // Two steps are not enough; an unmeasured step (no group of two) breaks the run.
    expect(retirements(rubrics, steps.slice(1), policy)).toEqual([])
    expect(retirements(rubrics, [...steps.slice(0, 2), [spreadOf('dead', null)]], policy)).toEqual([])
    expect(retirements(rubrics, steps, { ...policy, retireAfterSteps: null })).toEqual([])
  })

  it('caps the adaptive set by spread, keeping criteria not yet measured, and never empties the rubrics', () => {
    const rubrics = [rubric('anchor', true), rubric('low'), rubric('high'), rubric('mid'), rubric('new')]
    const step = [spreadOf('low', 0.05), spreadOf('high', 0.4), spreadOf('mid', 0.2)]
    const capped = retirements(rubrics, [step], { retireAfterSteps: null, minSpread: 0.02, maxActive: 2 })
    expect(capped.map((entry) => entry.rubric_id)).toEqual(['low', 'mid'])
    expect(capped[0]!.reason).toMatch(/over max_active_rubrics 2/)
    const alone = retirements([rubric('only')], [[spreadOf('only', 0)]], { ...policy, retireAfterSteps: 1 })
    expect(alone).toEqual([])
  })
})
