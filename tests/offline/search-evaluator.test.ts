import { describe, expect, it } from 'vitest'
import { createLimiter } from '../../src/search/algorithms/concurrency.ts'
import { Evaluator, GradeMemo, rubricKey } from '../../src/search/evaluator.ts'
import type { CriterionGrades, PromptItem, Verifier } from '../../src/search/types.ts'
import type { SearchRubric } from '../../src/schemas/search-rubric.ts'

const rubric = (overrides: Partial<SearchRubric> = {}): SearchRubric => ({
  rubric_id: 'r1',
  criteria: [
    {
      criterion_id: 'c1',
      text: 'A',
      weight: 2,
      criterion_type: null,
      check_points: [],
      positive_examples: [],
      negative_examples: [],
    },
    {
      criterion_id: 'c2',
      text: 'B',
      weight: 1,
      criterion_type: null,
      check_points: [],
      positive_examples: [],
      negative_examples: [],
    },
  ],
  grading_protocol: { grade_max: 10, allow_na: true, num_votes: 1 },
  metadata: {},
  ...overrides,
})
const item: PromptItem = {
  prompt_id: 'p1',
  prompt: 'q',
  metadata: {},
  candidates: ['x', 'y', 'z'].map((id) => ({
    candidate_id: id,
    text: `text ${id}`,
    source: 'base',
    label: {},
    metadata: {},
  })),
}

/** A verifier answering fixed grades per candidate id (or per vote), counting calls. */
function scripted(grades: Record<string, CriterionGrades | CriterionGrades[]>) {
  const calls: Array<{ id: string; vote: number; seed: number }> = []
  const verifier: Verifier = {
    async grade({ candidate, vote, seed }) {
      calls.push({ id: candidate.candidate_id, vote, seed })
      const answer = grades[candidate.candidate_id]!
      return Array.isArray(answer) ? answer[vote]! : answer
    },
  }
  return { verifier, calls }
}

describe('Evaluator scores', () => {
  it('weight-normalises integer grades over grade_max; candidates best first, ties in dataset order', async () => {
    const { verifier } = scripted({ x: { c1: 5, c2: 10 }, y: { c1: 10, c2: 5 }, z: { c1: 5, c2: 10 } })
    const evaluator = new Evaluator({ verifier, limit: createLimiter(4), seed: 7 })
    const result = await evaluator.evaluate(item, rubric())
    expect(result.candidates.map((c) => c.candidate_id)).toEqual(['y', 'x', 'z'])
    expect(result.candidates[0]!.score).toBeCloseTo((2 * 1 + 1 * 0.5) / 3, 12)
    expect(result.candidates[1]!.score).toBeCloseTo((2 * 0.5 + 1 * 1) / 3, 12)
    expect(result.candidates[2]!.score).toBe(result.candidates[1]!.score)
  })

  it('skips N/A when the protocol allows it, and counts it as 0 otherwise', async () => {
    const { verifier } = scripted({ x: { c1: null, c2: 8 }, y: { c1: null, c2: null }, z: { c1: 0, c2: 0 } })
    const allow = await new Evaluator({ verifier, limit: createLimiter(1), seed: 7 }).evaluate(item, rubric())
    const byId = (r: typeof allow) => Object.fromEntries(r.candidates.map((c) => [c.candidate_id, c.score]))
    expect(byId(allow).x).toBeCloseTo(0.8, 12)
    expect(byId(allow).y).toBe(0) // nothing graded
    const strict = await new Evaluator({ verifier, limit: createLimiter(1), seed: 7 }).evaluate(
      item,
      rubric({ grading_protocol: { grade_max: 10, allow_na: false, num_votes: 1 } }),
    )
    expect(byId(strict).x).toBeCloseTo(0.8 / 3, 12)
  })

  it('averages grades over votes before scoring, and reports the variance of the per-vote scores', async () => {
    const { verifier, calls } = scripted({
      x: [
        { c1: 10, c2: 10 },
        { c1: 0, c2: 0 },
        { c1: 5, c2: null },
      ],
      y: { c1: 1, c2: 1 },
      z: { c1: 1, c2: 1 },
    })
    const evaluator = new Evaluator({ verifier, limit: createLimiter(8), seed: 7 })
    const x = (await evaluator.evaluate(item, rubric(), { votes: 3 })).candidates.find((c) => c.candidate_id === 'x')!
    expect(x.vote_scores).toEqual([1, 0, 0.5])
    expect(x.grades).toEqual({ c1: 5, c2: 5 })
    expect(x.score).toBeCloseTo(0.5, 12)
    expect(x.variance).toBeCloseTo((0.5 ** 2 + 0.5 ** 2 + 0) / 3, 12)
    // Vote seeds differ per vote and are stable.
    const seeds = calls.filter((c) => c.id === 'x').map((c) => c.seed)
    expect(new Set(seeds).size).toBe(3)
  })

  it('clamps and rounds out-of-range grades, and counts them', async () => {
    const { verifier } = scripted({ x: { c1: 14, c2: -2 }, y: { c1: 4.6, c2: Number.NaN }, z: { c1: 1, c2: 1 } })
    const evaluator = new Evaluator({ verifier, limit: createLimiter(1), seed: 7 })
    const result = await evaluator.evaluate(item, rubric())
    expect(result.candidates.find((c) => c.candidate_id === 'x')!.grades).toEqual({ c1: 10, c2: 0 })
    expect(result.candidates.find((c) => c.candidate_id === 'y')!.grades).toEqual({ c1: 5, c2: null })
    expect(evaluator.stats.invalid_grades).toBe(3)
  })
})

describe('Evaluator memo', () => {
  it('never re-grades the same content: other rubric ids, metadata or vote counts reuse the stored votes', async () => {
    const { verifier, calls } = scripted({ x: { c1: 1, c2: 2 }, y: { c1: 3, c2: 4 }, z: { c1: 5, c2: 6 } })
    const evaluator = new Evaluator({ verifier, limit: createLimiter(3), seed: 7 })
    await evaluator.evaluate(item, rubric(), { votes: 2 })
    await evaluator.evaluate(item, rubric({ rubric_id: 'renamed', metadata: { origin: 'proposer' } }), { votes: 1 })
    await Promise.all([
      evaluator.evaluate(item, rubric(), { votes: 2 }),
      evaluator.evaluate(item, rubric(), { votes: 2 }),
    ])
    expect(calls).toHaveLength(6)
    expect(evaluator.stats).toMatchObject({ verifier_calls: 6, grade_memo_hits: 15 })
    // Different criteria are different content.
    await evaluator.evaluate(item, rubric({ criteria: [{ ...rubric().criteria[0]!, text: 'A, strictly' }] }), {
      votes: 1,
    })
    expect(calls).toHaveLength(9)
  })

  it('shares one call between concurrent requests, and restores from a snapshot without calls', async () => {
    const { verifier, calls } = scripted({ x: { c1: 1, c2: 2 }, y: { c1: 3, c2: 4 }, z: { c1: 5, c2: 6 } })
    const first = new Evaluator({ verifier, limit: createLimiter(8), seed: 7 })
    await Promise.all([first.evaluate(item, rubric()), first.evaluate(item, rubric())])
    expect(calls).toHaveLength(3)
    const memo = new GradeMemo()
    memo.load(JSON.parse(JSON.stringify(first.memo.snapshot())))
    const second = new Evaluator({ verifier, limit: createLimiter(8), seed: 7, memo })
    expect(await second.evaluate(item, rubric())).toEqual(await first.evaluate(item, rubric()))
    expect(calls).toHaveLength(3)
  })

  it('keys rubrics by criteria, grade scale and N/A policy only', () => {
    expect(rubricKey(rubric({ rubric_id: 'other', metadata: { a: 1 } }))).toBe(rubricKey(rubric()))
    expect(rubricKey(rubric({ grading_protocol: { grade_max: 10, allow_na: true, num_votes: 3 } }))).toBe(
      rubricKey(rubric()),
    )
    expect(rubricKey(rubric({ grading_protocol: { grade_max: 5, allow_na: true, num_votes: 1 } }))).not.toBe(
      rubricKey(rubric()),
    )
    expect(rubricKey(rubric({ criteria: [rubric().criteria[1]!, rubric().criteria[0]!] }))).not.toBe(
      rubricKey(rubric()),
    )
  })

  it('keeps at most `limit` verifier calls in flight', async () => {
    let inFlight = 0
    let peak = 0
    const verifier: Verifier = {
      async grade() {
        peak = Math.max(peak, ++inFlight)
        for (let i = 0; i < 4; i++) await Promise.resolve()
        inFlight--
        return { c1: 1, c2: 1 }
      },
    }
    const evaluator = new Evaluator({ verifier, limit: createLimiter(2), seed: 7 })
    await evaluator.evaluate(item, rubric(), { votes: 5 })
    expect(peak).toBe(2)
    expect(evaluator.stats.verifier_calls).toBe(15)
  })
})
