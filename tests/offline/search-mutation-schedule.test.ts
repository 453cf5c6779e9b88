import { describe, expect, it } from 'vitest'
import { MutationScheduler, roulette } from '../../src/search/algorithms/mutation-schedule.ts'
import { Rng } from '../../src/hash/index.ts'
import { MUTATION_MODES } from '../../src/search/types.ts'
import type { AdaptiveMutation } from '../../src/search/config.ts'

const scheduler = (kind: AdaptiveMutation, overrides: Record<string, number> = {}) =>
  new MutationScheduler({
    kind,
    generations: 10,
    mutation_window_size: 10,
    min_mutation_weight: 0.1,
    exploration_phase_ratio: 0.3,
    diversity_threshold: 0.05,
    tie_tolerance: 1e-8,
    ...overrides,
  })

describe('mutation schedules', () => {
  it('fixed: cycles through every mode draw by draw, without touching the PRNG', () => {
    const fixed = scheduler('fixed')
    const rng = Rng.fromSeed(1)
    const before = rng.state()
    expect(Array.from({ length: 7 }, () => fixed.select(rng, null))).toEqual([...MUTATION_MODES, MUTATION_MODES[0]])
    expect(rng.state()).toEqual(before)
  })

  it('success_feedback: credits each mode by its own child, and never rewards a negative improvement', () => {
    const feedback = scheduler('success_feedback')
    for (let i = 0; i < 5; i++) {
      feedback.record('decompose', 0.3)
      feedback.record('raise_bar', -0.4)
    }
    const p = feedback.probabilities(null)
    expect(p.decompose).toBeGreaterThan(p.anti_fluff) // untried modes sit at 0.5 × 1
    expect(p.anti_fluff).toBeGreaterThan(p.raise_bar)
    expect(p.raise_bar).toBeGreaterThanOrEqual(0.1 / (1 + 0.1 * 6)) // floor before renormalisation
    expect(MUTATION_MODES.reduce((sum, mode) => sum + p[mode], 0)).toBeCloseTo(1, 12)
    expect(feedback.diagnostics()).toMatchObject({
      success_rates: { decompose: 1, raise_bar: 0, anti_fluff: null },
      avg_improvements: { decompose: 0.3 },
    })
  })

  it('exploration_decay: exploratory modes first, exploitative ones after the exploration phase', () => {
    const decay = scheduler('exploration_decay')
    expect(decay.probabilities(null).decompose).toBeCloseTo(2 / 7.5, 12)
    expect(roulette(decay.probabilities(null), 0.05)).toBe('raise_bar') // the first mode keeps weight 0.5/7.5
    expect(roulette(decay.probabilities(null), 0.1)).toBe('decompose')
    for (let g = 0; g < 3; g++) decay.advance()
    expect(roulette(decay.probabilities(null), 0.1)).toBe('raise_bar')
    expect(decay.probabilities(null).raise_bar).toBeCloseTo(2 / 7.5, 12)
    expect(decay.probabilities(null).decompose).toBeCloseTo(0.5 / 7.5, 12)
  })

  it('diversity_driven: low content diversity favours exploratory modes; a zero threshold is safe', () => {
    const driven = scheduler('diversity_driven')
    const low = driven.probabilities(0)
    const high = driven.probabilities(0.5)
    expect(low.decompose).toBeGreaterThan(low.raise_bar)
    expect(high.raise_bar).toBeGreaterThan(high.decompose)
    const zero = scheduler('diversity_driven', { diversity_threshold: 0 })
    expect(zero.probabilities(0).decompose).toBeGreaterThan(zero.probabilities(0).raise_bar)
    expect(zero.probabilities(0.3).raise_bar).toBeGreaterThan(zero.probabilities(0.3).decompose)
  })

  it('round-trips its state: a restored scheduler makes the same draws', () => {
    const original = scheduler('success_feedback')
    original.record('anti_fluff', 0.2)
    original.record('weight_perturb', 0)
    original.advance()
    const restored = new MutationScheduler(
      {
        kind: 'success_feedback',
        generations: 10,
        mutation_window_size: 10,
        min_mutation_weight: 0.1,
        exploration_phase_ratio: 0.3,
        diversity_threshold: 0.05,
        tie_tolerance: 1e-8,
      },
      JSON.parse(JSON.stringify(original.state())),
    )
    const [a, b] = [Rng.fromSeed(3), Rng.fromSeed(3)]
    expect(Array.from({ length: 20 }, () => restored.select(b, 0.1))).toEqual(
      Array.from({ length: 20 }, () => original.select(a, 0.1)),
    )
    expect(restored.state()).toEqual(original.state())
  })
})
