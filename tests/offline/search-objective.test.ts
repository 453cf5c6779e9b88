import { describe, expect, it } from 'vitest'
import { parseSearchConfig } from '../../src/search/index.ts'
import {
  computeObjective,
  groundTruthValues,
  JudgeMemo,
  kendallTau,
  ndcg,
  tailSize,
  type PairJudge,
} from '../../src/search/objective.ts'
import { createLimiter } from '../../src/search/algorithms/concurrency.ts'
import type { RubricEvaluation } from '../../src/search/evaluator.ts'
import type { Candidate, Preference, PromptItem } from '../../src/search/types.ts'

const candidate = (id: string, rank: number, source = 'base'): Candidate => ({
  candidate_id: id,
  text: id,
  source,
  label: { rank },
  metadata: {},
})
const promptOf = (candidates: Candidate[], prompt_id = 'p'): PromptItem => ({
  prompt_id,
  prompt: 'q',
  candidates,
  metadata: {},
})

/** An evaluation with the given score (and variance) per candidate id, sorted like the evaluator sorts. */
function evaluationOf(
  item: PromptItem,
  scores: Record<string, number>,
  variances: Record<string, number> = {},
): RubricEvaluation {
  const candidates = item.candidates
    .map((c, index) => ({
      candidate_id: c.candidate_id,
      index,
      score: scores[c.candidate_id]!,
      variance: variances[c.candidate_id] ?? 0,
      vote_scores: [],
      grades: {},
    }))
    .sort((a, b) => b.score - a.score || a.index - b.index)
  return { prompt_id: item.prompt_id, rubric_key: 'k', votes: 1, candidates }
}

/** The judge from ground-truth ranks. */
const byRank: PairJudge = async (_item, left, right) => Math.sign(right.label.rank! - left.label.rank!) as Preference

const config = (overrides: Record<string, unknown> = {}) => parseSearchConfig(overrides)

describe('tailSize', () => {
  it('grows the tail until it holds min_tail_pairs pairs, when there are enough candidates', () => {
    expect(tailSize(6, 0.25, 1)).toBe(2) // autosr: a single pair
    expect(tailSize(6, 0.25, 3)).toBe(3)
    expect(tailSize(8, 0.25, 6)).toBe(4)
    expect(tailSize(20, 0.25, 3)).toBe(5)
    expect(tailSize(2, 0.25, 3)).toBe(2) // never more than the candidates
  })
})

describe('computeObjective', () => {
  // Ranks c1 < c2 < c3 < c4; the rubric swaps c2 and c3.
  const item = promptOf([candidate('c1', 1, 'strong'), candidate('c2', 2), candidate('c3', 3), candidate('c4', 4, 'x')])
  const evaluation = evaluationOf(item, { c1: 0.9, c2: 0.5, c3: 0.7, c4: 0.1 }, { c1: 0.01, c2: 0.03, c3: 0.02 })

  it('matches a hand-computed vector with shrinkage and min_tail_pairs', async () => {
    const result = await computeObjective(item, evaluation, byRank, config())
    // Tail = c1, c3, c2 (3 pairs). (c1,c3) ✓ diverse, (c1,c2) ✓ diverse, (c3,c2) ✗ same source.
    expect(result).toMatchObject({
      tail_size: 3,
      tail_pairs: 3,
      judged_pairs: 3,
      valid_pairs: 3,
      correct_pairs: 2,
      diverse_pairs: 2,
    })
    expect(result.raw_tail_acc).toBeCloseTo(2 / 3, 12)
    expect(result.tail_acc).toBeCloseTo(0.5 + (3 / 11) * (2 / 3 - 0.5), 12) // 0.5454…
    expect(result.raw_diverse_tail_acc).toBe(1)
    expect(result.diverse_tail_acc).toBeCloseTo(0.5 + (2 / 10) * 0.5, 12) // shrunk by its own 2 pairs
    expect(result.tail_var).toBeCloseTo(0.02, 12)
    expect(result.total).toBeCloseTo(0.5 + 1 / 22 - 0.2 * 0.02 + 0.25 * 0.6, 12)
    expect(result.top_margin).toBeCloseTo(0.2, 12)
    expect(result.signed_top_margin).toBeCloseTo(0.4, 12) // c1 − c2
    expect(result.kendall_tau).toBeCloseTo(4 / 6, 12) // 5 concordant, 1 discordant
    const dcg = 1 + 1 / 3 / Math.log2(3) + 2 / 3 / 2
    const idcg = 1 + 2 / 3 / Math.log2(3) + 1 / 3 / 2
    expect(result.ndcg).toBeCloseTo(dcg / idcg, 12)
  })

  it('reproduces autosr with min_tail_pairs = 1: one valid pair with prior 8 gives 0.5 + 0.5/9', async () => {
    const six = promptOf(['a', 'b', 'c', 'd', 'e', 'f'].map((id, i) => candidate(id, i + 1, i % 2 ? 'base' : 'strong')))
    const result = await computeObjective(
      six,
      evaluationOf(six, { a: 0.9, b: 0.8, c: 0.5, d: 0.4, e: 0.2, f: 0.1 }),
      byRank,
      config({ min_tail_pairs: 1 }),
    )
    expect(result).toMatchObject({ tail_size: 2, valid_pairs: 1, diverse_pairs: 1 })
    expect(result.tail_acc).toBeCloseTo(0.5555555556, 9)
    expect(result.total).toBeCloseTo(0.6944444444, 9)
  })

  it('scores 0.5 without valid pairs (the judge ties everything)', async () => {
    const result = await computeObjective(item, evaluation, async () => 0, config())
    expect(result).toMatchObject({ valid_pairs: 0, raw_tail_acc: 0.5, tail_acc: 0.5, diverse_tail_acc: 0.5 })
  })

  it('counts a rubric tie within the tolerance as wrong', async () => {
    const flat = evaluationOf(item, { c1: 0.5, c2: 0.5, c3: 0.5 + 1e-10, c4: 0.1 })
    const result = await computeObjective(item, flat, byRank, config({ pair_confidence_prior: 0 }))
    expect(result.correct_pairs).toBe(0)
    expect(result.raw_tail_acc).toBe(0)
    // tau-b: the three pairs with c4 are ordered, three are ties
    expect(result.kendall_tau).toBeCloseTo(3 / Math.sqrt(6 * 3), 12)
  })

  it('falls back to TailAcc when no pair is diverse (prior 0, μ 0.4 → 1.4)', async () => {
    const same = promptOf([candidate('a', 1), candidate('b', 2), candidate('c', 3)])
    const result = await computeObjective(
      same,
      evaluationOf(same, { a: 0.9, b: 0.6, c: 0.3 }),
      byRank,
      config({ pair_confidence_prior: 0, mu_diverse: 0.4 }),
    )
    expect(result).toMatchObject({ raw_tail_acc: 1, diverse_pairs: 0, diverse_tail_acc: 1 })
    expect(result.total).toBeCloseTo(1.4, 12)
  })

  it('uses the ground-truth top two for the signed margin (negative if the rubric prefers the runner-up)', async () => {
    const swapped = evaluationOf(item, { c1: 0.5, c2: 0.9, c3: 0.3, c4: 0.1 })
    const result = await computeObjective(item, swapped, byRank, config())
    expect(result.signed_top_margin).toBeCloseTo(-0.4, 12)
    const unlabeled = promptOf(item.candidates.map((c) => ({ ...c, label: {} })))
    expect((await computeObjective(unlabeled, swapped, byRank, config())).signed_top_margin).toBeCloseTo(0.4, 12)
  })

  it('judges a seeded, stable sample of pairs under a budget, never fewer than min_tail_pairs', async () => {
    const ten = promptOf(Array.from({ length: 10 }, (_, i) => candidate(`c${i}`, i + 1)))
    const scores = Object.fromEntries(ten.candidates.map((c, i) => [c.candidate_id, 1 - i / 10]))
    const big = config({ tail_fraction: 0.6 }) // tail 6 → 15 pairs
    const asked: string[][] = [[], [], []]
    const recorder =
      (log: string[]): PairJudge =>
      async (i, l, r) => {
        log.push(`${l.candidate_id}-${r.candidate_id}`)
        return byRank(i, l, r)
      }
    const full = await computeObjective(ten, evaluationOf(ten, scores), recorder(asked[0]!), big, { budget: 100 })
    const sampled = await computeObjective(ten, evaluationOf(ten, scores), recorder(asked[1]!), big, { budget: 5 })
    await computeObjective(ten, evaluationOf(ten, scores), recorder(asked[2]!), big, { budget: 5 })
    expect(full.judged_pairs).toBe(15)
    expect(sampled).toMatchObject({ tail_pairs: 15, judged_pairs: 5 })
    expect(asked[1]).toEqual(asked[2])
    const tiny = await computeObjective(ten, evaluationOf(ten, scores), byRank, big, { budget: 1 })
    expect(tiny.judged_pairs).toBe(3)
  })
})

describe('JudgeMemo', () => {
  it('asks the judge once per unordered pair, always in dataset order, and answers either orientation', async () => {
    const calls: string[] = []
    const item = promptOf([candidate('a', 2), candidate('b', 1), candidate('c', 3)])
    const judges = new JudgeMemo(
      {
        compare: async ({ left, right }) => {
          calls.push(`${left.candidate_id}${right.candidate_id}`)
          return Math.sign(right.label.rank! - left.label.rank!) as Preference
        },
      },
      createLimiter(2),
    )
    const [a, b] = item.candidates as [Candidate, Candidate]
    const answers = await Promise.all([judges.prefer(item, b, a), judges.prefer(item, a, b), judges.prefer(item, b, a)])
    expect(answers).toEqual([1, -1, 1])
    expect(calls).toEqual(['ab'])
    expect(judges.judge_calls).toBe(1)
    const restored = new JudgeMemo(
      {
        compare: async () => {
          throw new Error('must not be called')
        },
      },
      createLimiter(1),
    )
    restored.load(judges.snapshot())
    expect(await restored.prefer(item, a, b)).toBe(-1)
  })
})

describe('ranking metrics', () => {
  it('Kendall tau-b: 1 for the same order, −1 reversed, null for a constant vector', () => {
    expect(kendallTau([3, 2, 1], [30, 20, 10])).toBe(1)
    expect(kendallTau([1, 2, 3], [30, 20, 10])).toBe(-1)
    expect(kendallTau([1, 1, 1], [3, 2, 1])).toBeNull()
  })

  it('NDCG: 1 for the ideal order, less for a flat rubric (ties broken against the truth)', () => {
    expect(ndcg([0.9, 0.5, 0.1], [3, 2, 1])).toBe(1)
    expect(ndcg([0.5, 0.5, 0.5], [3, 2, 1])!).toBeLessThan(1)
    expect(ndcg([0.5, 0.4], [1, 1])).toBeNull()
  })

  it('reads ground truth from ranks, else qualities, else nothing', () => {
    expect(groundTruthValues(promptOf([candidate('a', 1), candidate('b', 2)]))).toEqual([-1, -2])
    const quality = promptOf([
      { ...candidate('a', 1), label: { quality: 0.3 } },
      { ...candidate('b', 1), label: { quality: 0.9 } },
    ])
    expect(groundTruthValues(quality)).toEqual([0.3, 0.9])
    expect(groundTruthValues(promptOf([candidate('a', 1), { ...candidate('b', 1), label: {} }]))).toBeNull()
  })
})
