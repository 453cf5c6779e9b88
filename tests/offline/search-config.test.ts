import { describe, expect, it } from 'vitest'
import { configHash, parseSearchConfig } from '../../src/search/index.ts'

describe('SearchConfig', () => {
  it('fills every default (autosr §2.2 and §2.4, plus the new knobs)', () => {
    expect(parseSearchConfig({})).toEqual({
      mode: 'evolutionary',
      seed: 7,
      iterations: 6,
      iteration_scope: 'global_batch',
      generations: 12,
      population_size: 8,
      mutations_per_round: 6,
      mutation_parent_count: 3,
      batch_size: 3,
      survival_fraction: 0.2,
      elitism_count: 2,
      stagnation_generations: 6,
      selection_strategy: 'rank',
      tournament_size: 3,
      tournament_p: 0.8,
      top_k_ratio: 0.3,
      diversity_weight: 0.3,
      adaptive_mutation: 'fixed',
      mutation_window_size: 10,
      min_mutation_weight: 0.1,
      exploration_phase_ratio: 0.3,
      diversity_threshold: 0.05,
      stop_when_distinguished: true,
      distinguish_margin: null,
      distinguish_min_tail_acc: 0.8,
      tail_fraction: 0.25,
      lambda_var: 0.2,
      mu_diverse: 0.25,
      pair_confidence_prior: 8,
      tie_tolerance: 1e-8,
      min_tail_pairs: 3,
      pair_budget_small: 8,
      pair_budget_medium: 24,
      pair_budget_full: 0,
      num_votes: null,
      concurrency: 8,
      prompt_concurrency: 4,
    })
  })

  it('names the offending field in errors, including cross-field rules and unknown enum values', () => {
    expect(() => parseSearchConfig({ population_size: 1 })).toThrow(/population_size/)
    expect(() => parseSearchConfig({ tail_fraction: 0 })).toThrow(/tail_fraction/)
    expect(() => parseSearchConfig({ selection_strategy: 'roulette' })).toThrow(/selection_strategy/)
    expect(() => parseSearchConfig({ population_size: 4, mutation_parent_count: 5 })).toThrow(
      /mutation_parent_count: must be at most population_size \(4\)/,
    )
    try {
      parseSearchConfig({ generations: 0, seed: -1 })
      expect.unreachable()
    } catch (error) {
      expect(error).toMatchObject({ code: 'invalid_request', details: [{ field: 'seed' }, { field: 'generations' }] })
    }
  })

  it('hashes what changes results: the seed does, concurrency does not', () => {
    const base = configHash(parseSearchConfig({}))
    expect(configHash(parseSearchConfig({ concurrency: 32, prompt_concurrency: 1 }))).toBe(base)
    expect(configHash(parseSearchConfig({ seed: 8 }))).not.toBe(base)
    expect(configHash(parseSearchConfig({ min_tail_pairs: 1 }))).not.toBe(base)
  })
})
