import { describe, expect, it } from 'vitest'
import { populationDiversity, rubricDistance } from '../../src/search/diversity.ts'
import type { SearchRubric } from '../../src/schemas/search-rubric.ts'

const rubric = (id: string, texts: Array<string | [string, number]>): SearchRubric => ({
  rubric_id: id,
  criteria: texts.map((entry, i) => {
    const [text, weight] = typeof entry === 'string' ? [entry, 1] : entry
    return {
      criterion_id: `c${i}`,
      text,
      weight,
      criterion_type: null,
      check_points: [],
      positive_examples: [],
      negative_examples: [],
    }
  }),
  grading_protocol: { grade_max: 10, allow_na: true, num_votes: 1 },
  metadata: {},
})

const facts = rubric('a', ['Every factual claim is accurate', 'The answer cites evidence'])
const style = rubric('b', ['Tone stays warm and friendly', 'Uses short paragraphs'])
const mixed = rubric('c', ['Every factual claim is accurate', 'Uses short paragraphs'])

describe('rubricDistance (criterion content, not hashes)', () => {
  it('is 0 for identical content, whatever the ids and metadata', () => {
    expect(rubricDistance(facts, { ...structuredClone(facts), rubric_id: 'copy', metadata: { origin: 'x' } })).toBe(0)
  })

  it('is 1 for rubrics with no words in common, and in between for partial overlap', () => {
    expect(rubricDistance(facts, style)).toBe(1)
    const partial = rubricDistance(facts, mixed)
    expect(partial).toBeGreaterThan(0.2)
    expect(partial).toBeLessThan(0.8)
    expect(rubricDistance(mixed, facts)).toBe(partial)
  })

  it('grows with the size of an edit, and sees weight changes', () => {
    const oneWord = rubric('d', ['Every factual claim is accurate', 'The answer cites sources'])
    expect(rubricDistance(facts, oneWord)).toBeGreaterThan(0)
    expect(rubricDistance(facts, oneWord)).toBeLessThan(rubricDistance(facts, mixed))
    const reweighted = rubric('e', [['Every factual claim is accurate', 1.2], 'The answer cites evidence'])
    expect(rubricDistance(facts, reweighted)).toBeGreaterThan(0)
    expect(rubricDistance(facts, reweighted)).toBeLessThan(rubricDistance(facts, oneWord))
  })
})

describe('populationDiversity', () => {
  it('is 0 below two rubrics and for copies, and tracks how different a population is (not a constant)', () => {
    expect(populationDiversity([facts])).toBe(0)
    expect(populationDiversity([facts, structuredClone(facts)])).toBe(0)
    const low = populationDiversity([facts, mixed])
    const high = populationDiversity([facts, style])
    expect(low).toBeGreaterThan(0)
    expect(high).toBeGreaterThan(low)
    expect(populationDiversity([facts, style, mixed])).toBeCloseTo(
      (1 + rubricDistance(facts, mixed) + rubricDistance(style, mixed)) / 3,
      12,
    )
  })
})
