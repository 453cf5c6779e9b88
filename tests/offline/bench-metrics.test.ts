import { describe, expect, it } from 'vitest'
import {
  accuracyOf,
  benchMetrics,
  compareScores,
  kWayOutcome,
  metricsByGroup,
  pairOutcome,
  tailOutcomes,
  truthOf,
  wilsonInterval,
  type ScoredCandidate,
  type ScoredItem,
} from '../../src/bench/metrics.ts'

const c = (candidate_id: string, truth: number | undefined, score: number | null): ScoredCandidate => ({
  candidate_id,
  truth,
  score,
})
const pair = (id: string, better: number | null, worse: number | null, group = 'g'): ScoredItem => ({
  item_id: id,
  group,
  candidates: [c('a', -1, better), c('b', -2, worse)],
})

describe('wilsonInterval', () => {
  it('matches known values', () => {
    const [low, high] = wilsonInterval(8, 10)!
    expect(low).toBeCloseTo(0.4902, 4)
    expect(high).toBeCloseTo(0.9433, 4)
    const [l2, h2] = wilsonInterval(50, 100)!
    expect(l2).toBeCloseTo(0.4038, 4)
    expect(h2).toBeCloseTo(0.5962, 4)
    const [l3, h3] = wilsonInterval(0, 10)!
    expect(l3).toBe(0)
    expect(h3).toBeCloseTo(0.2775, 4)
    const [l4, h4] = wilsonInterval(10, 10)!
    expect(l4).toBeCloseTo(0.7225, 4)
    expect(h4).toBe(1)
    expect(wilsonInterval(0, 0)).toBeNull()
  })
})

describe('outcomes and ties', () => {
  it('compares scores: strict win, tie, loss, failure', () => {
    expect(compareScores({ score: 0.9 }, { score: 0.1 })).toBe('correct')
    expect(compareScores({ score: 0.5 }, { score: 0.5 })).toBe('tie')
    expect(compareScores({ score: 0.1 }, { score: 0.9 })).toBe('wrong')
    expect(compareScores({ score: null }, { score: 0.9 })).toBe('failure')
  })

  it('counts ties as half or as wrong, and failures apart (not in n)', () => {
    const outcomes = ['correct', 'tie', 'wrong', 'failure'] as const
    expect(accuracyOf(outcomes, 'half')).toMatchObject({
      n: 3,
      correct: 1,
      ties: 1,
      wrong: 1,
      failures: 1,
      accuracy: 0.5,
    })
    expect(accuracyOf(outcomes, 'wrong').accuracy).toBeCloseTo(1 / 3)
    expect(accuracyOf(['failure'], 'half')).toMatchObject({ n: 0, accuracy: null, ci95: null, failures: 1 })
  })

  it('reads ground truth from rank or quality', () => {
    expect(truthOf({ rank: 2 })).toBe(-2)
    expect(truthOf({ quality: 0.3 })).toBe(0.3)
    expect(truthOf({})).toBeUndefined()
  })
})

describe('pairwise, both orders and swap consistency', () => {
  it('a tie is half in each order but never swap-consistent', () => {
    const outcome = pairOutcome(pair('p', 0.5, 0.5))!
    expect(outcome).toMatchObject({ ab: 'tie', ba: 'tie', swap: 'wrong' })
    const metrics = benchMetrics([pair('p1', 0.9, 0.1), pair('p2', 0.5, 0.5)], { ties: 'half' })
    expect(metrics.pairwise!.ab.accuracy).toBe(0.75)
    expect(metrics.pairwise!.ba.accuracy).toBe(0.75)
    expect(metrics.pairwise!.swap_consistent.accuracy).toBe(0.5)
    expect(metrics.pairwise!.ab.ties).toBe(1)
  })

  it('uses the reversed presentation scores for B/A when given', () => {
    const item: ScoredItem = { ...pair('p', 0.9, 0.1), reversed: [c('a', -1, 0.2), c('b', -2, 0.6)] }
    expect(pairOutcome(item)).toMatchObject({ ab: 'correct', ba: 'wrong', swap: 'wrong' })
    const failedReverse: ScoredItem = { ...pair('p', 0.9, 0.1), reversed: [c('a', -1, null), c('b', -2, 0.6)] }
    expect(pairOutcome(failedReverse)).toMatchObject({ ab: 'correct', ba: 'failure', swap: 'failure' })
  })

  it('the better candidate may come second', () => {
    const item: ScoredItem = { item_id: 'p', group: 'g', candidates: [c('a', -2, 0.1), c('b', -1, 0.8)] }
    expect(pairOutcome(item)?.ab).toBe('correct')
  })

  it('a failure is counted apart, never as a tie', () => {
    const metrics = benchMetrics([pair('p1', 0.9, 0.1), pair('p2', null, 0.4)])
    expect(metrics.pairwise!.ab).toMatchObject({ n: 1, ties: 0, failures: 1, accuracy: 1 })
    expect(metrics.failed_items).toBe(1)
  })
})

describe('K-way and tail accuracy', () => {
  const ranked = (id: string, scores: Array<number | null>, group = 'g'): ScoredItem => ({
    item_id: id,
    group,
    candidates: scores.map((score, index) => c(`c${index}`, -(index + 1), score)),
  })

  it('the top-ranked candidate must score strictly highest', () => {
    expect(kWayOutcome(ranked('p', [0.9, 0.5, 0.1]))).toBe('correct')
    expect(kWayOutcome(ranked('p', [0.9, 0.9, 0.1]))).toBe('tie')
    expect(kWayOutcome(ranked('p', [0.5, 0.9, 0.1]))).toBe('wrong')
    expect(kWayOutcome(ranked('p', [0.9, null, 0.1]))).toBe('failure')
    expect(kWayOutcome(ranked('p', [0.9, 0.1]))).toBeUndefined()
  })

  it('tail: the pairs among the top 25% (at least 2)', () => {
    expect(tailOutcomes(ranked('p', [0.9, 0.8, 0.1, 0.0]))).toEqual(['correct'])
    expect(tailOutcomes(ranked('p', [0.1, 0.8, 0.9, 0.0, 0.5, 0.4, 0.3, 0.2]))).toEqual(['wrong'])
    expect(tailOutcomes(ranked('p', [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1]))).toHaveLength(3)
  })

  it('groups K-way results by the item group', () => {
    const items = [
      ranked('m1', [0.9, 0.5, 0.1], 'math'),
      ranked('m2', [0.1, 0.5, 0.9], 'math'),
      ranked('c1', [0.9, 0.5, 0.1], 'chat'),
      pair('x', 0.2, 0.1, 'chat'),
    ]
    const groups = metricsByGroup(items)
    expect(Object.keys(groups)).toEqual(['chat', 'math'])
    expect(groups.math!.kway!.accuracy).toBe(0.5)
    expect(groups.chat!.kway!.accuracy).toBe(1)
    expect(groups.chat!.pairwise!.ab.accuracy).toBe(1)
    expect(groups.math!.pairwise).toBeNull()
    expect(benchMetrics(items).kway).toMatchObject({ n: 3, correct: 2 })
  })

  it('bootstrap intervals are seeded and bracket the estimate', () => {
    const items = Array.from({ length: 40 }, (_, index) => pair(`p${index}`, index % 4 === 0 ? 0.1 : 0.9, 0.5))
    const a = benchMetrics(items, { bootstrap: 300, seed: 7 })
    const b = benchMetrics(items, { bootstrap: 300, seed: 7 })
    expect(a.pairwise!.ab.bootstrap95).toEqual(b.pairwise!.ab.bootstrap95)
    const [low, high] = a.pairwise!.ab.bootstrap95!
    expect(low).toBeLessThanOrEqual(0.75)
    expect(high).toBeGreaterThanOrEqual(0.75)
    expect(high - low).toBeGreaterThan(0.1)
  })
})
