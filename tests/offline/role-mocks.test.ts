import { describe, expect, it } from 'vitest'
import {
  answerLibraryAnalyze,
  answerLibraryEvolve,
  answerLibraryJudge,
  answerLibraryRoute,
  answerLibraryTool,
  instructionCoverage,
  type LibraryJudgeInput,
} from '../../src/evolve/mock.ts'
import {
  answerSearchJudge,
  answerSearchPropose,
  answerSearchVerify,
  heuristicCriteria,
  heuristicGrades,
} from '../../src/search/roles/mock.ts'
import { seededRandom } from '../../src/hash/index.ts'
import type { Criterion } from '../../src/schemas/search-rubric.ts'

const criterion = (criterion_id: string, fields: Partial<Criterion> = {}): Criterion => ({
  criterion_id,
  text: `Criterion ${criterion_id}.`,
  weight: 1,
  criterion_type: null,
  check_points: [],
  positive_examples: [],
  negative_examples: [],
  ...fields,
})

describe('search role mocks', () => {
  const criteria = [
    criterion('steps', { check_points: ['first', 'then'] }),
    criterion('no_fluff', { negative_examples: ['great question'] }),
  ]

  it('verifier: grades from check points and negative examples; noise 1 flips every grade', () => {
    const answer = 'First check the logs, then bisect.'
    expect(heuristicGrades(answer, criteria, 10, seededRandom('v', 1), 0)).toEqual({ steps: 10, no_fluff: 1 })
    expect(heuristicGrades(`Great question! ${answer}`, criteria, 10, seededRandom('v', 1), 0).no_fluff).toBe(0)
    expect(heuristicGrades(answer, criteria, 10, seededRandom('v', 1), 1)).toEqual({ steps: 0, no_fluff: 9 })
  })

  it('verifier: the same seed and vote give the same noisy grades', () => {
    const input = { prompt: 'p', answer: 'First, then.', criteria, grade_max: 10, allow_na: false, vote: 2, seed: 7 }
    const noisy = { ...input, noise: 0.5 }
    expect(answerSearchVerify(noisy)).toEqual(answerSearchVerify(noisy))
  })

  it('proposer: the same seed gives the same child, renormalised to weights summing to 1', () => {
    const input = { prompt: 'p', criteria, mode: 'weight_perturb' as const, top: 'a', runner_up: 'b', seed: 3 }
    const child = answerSearchPropose(input) as { rubric: { criteria: Criterion[] } }
    expect(child).toEqual(answerSearchPropose(input))
    const total = child.rubric.criteria.reduce((sum, item) => sum + item.weight, 0)
    expect(total).toBeCloseTo(1, 9)
  })

  it('judge: prefers the longer, structured answer in either position, and ties identical texts', () => {
    const short = 'Check stuff.'
    const long = '1. Check the logs for the failing step.\n2. Bisect the change.\n\nThen roll back.'
    expect(answerSearchJudge({ prompt: 'p', first: short, second: long })).toMatchObject({ winner: 'B' })
    expect(answerSearchJudge({ prompt: 'p', first: long, second: short })).toMatchObject({ winner: 'A' })
    expect(answerSearchJudge({ prompt: 'p', first: long, second: long })).toMatchObject({ winner: 'tie' })
  })

  it('initializer: four criteria whose weights sum to 1', () => {
    const made = heuristicCriteria('Explain how to roll back a failed database migration.')
    expect(made).toHaveLength(4)
    expect(made.reduce((sum, item) => sum + item.weight, 0)).toBeCloseTo(1, 9)
  })
})

describe('judge library mocks', () => {
  const instruction = 'Name three rivers in Africa'
  const first = 'The Nile, the Congo and the Niger are rivers in Africa.'
  const second = 'Rivers are long. They flow into the sea, usually, and are often used for transport and water.'
  const turn = (fields: Partial<LibraryJudgeInput> = {}): LibraryJudgeInput => ({
    instruction,
    first,
    second,
    skills: [],
    tools: [],
    observations: [],
    max_tool_calls: 3,
    ...fields,
  })

  it('router: entries sharing a word with the instruction, else every entry', () => {
    const entries = [
      { name: 'river-facts', kind: 'skill' as const, description: 'facts about rivers' },
      { name: 'style', kind: 'skill' as const, description: 'tone' },
    ]
    expect(answerLibraryRoute({ instruction, entries })).toEqual({ entries: ['river-facts'] })
    expect(answerLibraryRoute({ instruction: 'Write a haiku', entries })).toEqual({ entries: ['river-facts', 'style'] })
  })

  it('sub-agent: calls a routed tool once, then follows what the observation favours', () => {
    const tools = [{ name: 'coverage-check', when_to_use: 'always' }]
    expect(answerLibraryJudge(turn({ tools }))).toMatchObject({ tool: { name: 'coverage-check' } })
    const observed = turn({ tools, observations: [{ tool: 'coverage-check', text: '{"favours": "A"}' }] })
    expect(answerLibraryJudge(observed)).toMatchObject({ answer: { preference: 'A' } })
  })

  it('sub-agent: without skills or tools prefers the longer answer; a coverage skill prefers the covering one', () => {
    expect(answerLibraryJudge(turn())).toMatchObject({ answer: { preference: 'B' } })
    const skills = [{ name: 'instruction-coverage', body: 'Judge by instruction coverage.' }]
    expect(answerLibraryJudge(turn({ skills }))).toMatchObject({ answer: { preference: 'A' } })
  })

  it('tool: measures instruction coverage of each answer', () => {
    expect(instructionCoverage(instruction, first)).toBeGreaterThan(instructionCoverage(instruction, second))
    expect(answerLibraryTool({ instruction, first, second })).toMatchObject({ favours: 'A' })
  })

  it('analyzer and evolver: wrong verdicts ask for a coverage skill, never one already rolled back', () => {
    const wrong = { id: 'p1', instruction, label: 'A', prediction: 'B', correct: false, chain: 'length and structure' }
    const analysis = answerLibraryAnalyze({ entries: [], results: [wrong] }) as { signals: { kind: string }[] }
    expect(analysis.signals.map((signal) => signal.kind)).toEqual(['missing_skill', 'missing_tool'])
    const evolve = (rejected: string[]) => answerLibraryEvolve({ entries: [], signals: analysis.signals, rejected })
    expect(evolve([])).toMatchObject({ op: 'add', entry: { name: 'instruction-coverage' } })
    expect(evolve(['add instruction-coverage'])).toMatchObject({ op: 'add', entry: { name: 'coverage-check' } })
    expect(evolve(['add instruction-coverage', 'add coverage-check'])).toMatchObject({ op: 'none' })
  })
})
