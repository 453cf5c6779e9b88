import { describe, expect, it } from 'vitest'
import { Rng } from '../../src/hash/index.ts'
import { selectParents, type Ranked, type SelectionOptions } from '../../src/search/algorithms/selection.ts'
import type { SearchRubric } from '../../src/schemas/search-rubric.ts'

const rubric = (text: string): SearchRubric => ({
  rubric_id: text,
  criteria: [
    {
      criterion_id: 'c',
      text,
      weight: 1,
      criterion_type: null,
      check_points: [],
      positive_examples: [],
      negative_examples: [],
    },
  ],
  grading_protocol: { grade_max: 10, allow_na: true, num_votes: 1 },
  metadata: {},
})
const member = (key: string, total: number, text = `criterion about ${key}`): Ranked => ({
  key,
  total,
  rubric: rubric(text),
})
/** Sorted best first, with a duplicate of the best. */
const population = [
  member('a', 0.9),
  member('a', 0.9),
  member('b', 0.8),
  member('c', 0.7),
  member('d', 0.6),
  member('e', 0.5),
  member('f', 0.4),
]
const options = (overrides: Partial<SelectionOptions>): SelectionOptions => ({
  strategy: 'rank',
  count: 3,
  rng: Rng.fromSeed(1),
  tournament_size: 3,
  tournament_p: 0.8,
  top_k_ratio: 0.3,
  diversity_weight: 0.3,
  ...overrides,
})
const keys = (members: Ranked[]) => members.map((m) => m.key)

describe('selectParents', () => {
  it('rank: the best distinct rubrics in order', () => {
    expect(keys(selectParents(population, options({})))).toEqual(['a', 'b', 'c'])
    expect(keys(selectParents(population, options({ count: 10 })))).toEqual(['a', 'b', 'c', 'd', 'e', 'f'])
    expect(selectParents([], options({}))).toEqual([])
  })

  it('tournament: distinct picks, reproducible from the PRNG, always the draw winner with p = 1', () => {
    const first = keys(selectParents(population, options({ strategy: 'tournament', count: 4, rng: Rng.fromSeed(5) })))
    expect(new Set(first).size).toBe(4)
    expect(
      keys(selectParents(population, options({ strategy: 'tournament', count: 4, rng: Rng.fromSeed(5) }))),
    ).toEqual(first)
    // A tournament over everything that remains, always won by the best, is rank selection.
    expect(
      keys(
        selectParents(population, options({ strategy: 'tournament', count: 3, tournament_size: 10, tournament_p: 1 })),
      ),
    ).toEqual(['a', 'b', 'c'])
  })

  it('tournament: weaker members win sometimes (p < 1), but the best wins most often', () => {
    const wins = new Map<string, number>()
    const rng = Rng.fromSeed(9)
    for (let i = 0; i < 400; i++) {
      const [winner] = selectParents(
        population,
        options({ strategy: 'tournament', count: 1, rng, tournament_size: 6, tournament_p: 0.5 }),
      )
      wins.set(winner!.key, (wins.get(winner!.key) ?? 0) + 1)
    }
    expect(wins.get('a')!).toBeGreaterThan(200)
    expect(wins.size).toBeGreaterThan(3)
  })

  it('top_k: quality alone is rank order; weighing diversity, a different rubric beats a near-copy of the best', () => {
    const near = [
      member('best', 0.9, 'answer is factually accurate and cites evidence'),
      member('copy', 0.89, 'answer is factually accurate and cites evidence too'),
      member('other', 0.8, 'tone is warm and concise'),
      member('weak', 0.1),
    ]
    const topK = (diversity_weight: number) =>
      keys(selectParents(near, options({ strategy: 'top_k', count: 2, top_k_ratio: 0.75, diversity_weight })))
    expect(topK(0)).toEqual(['best', 'copy'])
    expect(topK(0.7)).toEqual(['best', 'other'])
    // The pool is the top max(count, ⌊n·ratio⌋): with ratio 0.3 'other' is outside it.
    expect(keys(selectParents(near, options({ strategy: 'top_k', count: 2, diversity_weight: 0.7 })))).toEqual([
      'best',
      'copy',
    ])
  })
})
