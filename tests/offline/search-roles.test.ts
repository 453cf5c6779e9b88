import { describe, expect, it } from 'vitest'
import { heuristicCriteria, mutateCriteria, promptKeywords, textStructureScore } from '../../src/search/roles/mock.ts'
import { MockChatModel } from '../../src/llm/mock.ts'
import { LlmError, type ChatModel, type ChatRequest } from '../../src/llm/types.ts'
import {
  buildInitializerRequest,
  buildProposerRequest,
  buildVerifierRequest,
  chooseJudge,
  extractAnswer,
  extractCandidate,
  extractPrompt,
  extractRegex,
  extractTag,
  HeuristicJudge,
  LlmPairJudge,
  LlmRubricInitializer,
  LlmRubricProposer,
  LlmVerifier,
  meanGrades,
  modeContractViolation,
  parseExtraction,
  parseInitializerReply,
  parseJudgeReply,
  parsePresetRubrics,
  parseProposerReply,
  parseVerifierReply,
  PresetInitializer,
  QualityJudge,
  RankJudge,
  reconcile,
  rubricBaseId,
  rubricScore,
} from '../../src/search/roles/index.ts'
import { seededRandom } from '../../src/hash/index.ts'
import {
  MUTATION_MODES,
  PromptItem,
  type Candidate,
  type MutationMode,
  type PreferenceJudge,
} from '../../src/search/types.ts'
import {
  type Criterion,
  isParsedSearchRubric,
  rubricFromParsedParts,
  SearchRubric,
} from '../../src/schemas/search-rubric.ts'
import { sameCriteria } from '../../src/search/roles/rubric.ts'
import { failureOf } from '../support/failure.ts'

const item = PromptItem.parse({
  prompt_id: 'p1',
  prompt: 'Write a debugging plan for a flaky integration test that fails on CI but passes locally.',
  candidates: [
    {
      candidate_id: 'c1',
      text:
        'First, reproduce the failure, because flaky tests hide timing issues. Second, collect CI logs.\n1. ' +
        'Compare environments\n2. Bisect the change. For example, check each step in detail.',
    },
    { candidate_id: 'c2', text: 'In conclusion, as an AI language model I think you should rerun it.' },
    { candidate_id: 'c3', text: 'Check the integration test.' },
  ],
})
const [c1, c2, c3] = item.candidates as [Candidate, Candidate, Candidate]

/** Weights 2:1 on a 0..5 scale: autosr's test_models vectors, on the explicit scale. */
const rubric21 = (allowNa = true) =>
  SearchRubric.parse({
    rubric_id: 'r1',
    criteria: [
      { criterion_id: 'c1', text: 'A', weight: 2 },
      { criterion_id: 'c2', text: 'B', weight: 1 },
    ],
    grading_protocol: { grade_max: 5, allow_na: allowNa, num_votes: 1 },
  })
const base = () =>
  SearchRubric.parse({
    rubric_id: 'p1_r0',
    criteria: heuristicCriteria(item.prompt),
    grading_protocol: { grade_max: 10, allow_na: true, num_votes: 1 },
  })
const mock = new MockChatModel()
const noSleep = async () => {}
const retry = { maxAttempts: 3, sleep: noSleep }

/** A model that answers every request with the next scripted text (the last one repeats) and records requests. */
/** The two answers a judge request shows, in order: its second and third data blocks (the first is the prompt). */
function judgedAnswers(request: ChatRequest): string[] {
  const user = request.messages.at(-1)!.content
  return [...user.matchAll(/<<<DATA-(\w+)\n([\s\S]*?)\nDATA-\1>>>/g)].slice(1).map((match) => match[2]!)
}

function scripted(...replies: string[]): ChatModel & { requests: ChatRequest[] } {
  const requests: ChatRequest[] = []
  return {
    id: 'scripted',
    requests,
    async complete(request) {
      requests.push(request)
      const text = replies[Math.min(requests.length - 1, replies.length - 1)]!
      return { text, model: 'scripted', usage: { prompt_tokens: 0, completion_tokens: 0 } }
    },
  }
}

describe('content extraction', () => {
  it('tag: non-greedy, case-insensitive segments across lines, trimmed and joined; the original when absent', () => {
    expect(
      extractTag('x <content> one\n</content> y <CONTENT>two</Content> <content>  </content>', 'content', ' | '),
    ).toBe('one | two')
    expect(extractTag('<question id="7">\nWhat?\n</question>', 'question')).toBe('What?')
    expect(extractTag('no tags here', 'content')).toBe('no tags here')
    expect(() => extractTag('x', 'a|b')).toThrow(RangeError)
  })

  it('regex: dot-all, group 1 when grouped, the whole match otherwise; the original when nothing matches', () => {
    expect(extractRegex('Q: one\nQ: two', 'Q: (\\w+)', ',')).toBe('one,two')
    expect(extractRegex('[a\nb] [c]', '\\[.*?\\]', ' ')).toBe('[a\nb] [c]')
    expect(extractRegex('BEGIN\nx\ny\nEND', 'BEGIN(.*)END')).toBe('x\ny')
    expect(extractRegex('nothing', 'Q: (\\w+)')).toBe('nothing')
  })

  it('answer: <answer> segments, else without <think> blocks (and a stray </think>), else the original', () => {
    expect(extractAnswer('<think>hmm</think><answer> 4 </answer> and <ANSWER>four</ANSWER>')).toBe('4\n\nfour')
    expect(extractAnswer('<think>\nlong\n</think>\nThe answer is 4.')).toBe('The answer is 4.')
    expect(extractAnswer('reasoning the template opened</think> The answer is 4.')).toBe('The answer is 4.')
    expect(extractAnswer('<think>only thoughts</think>')).toBe('<think>only thoughts</think>')
    expect(extractAnswer('plain')).toBe('plain')
  })

  it('dispatches on the configured kinds; xml is an alias of tag; a bad pattern is refused', () => {
    const config = parseExtraction({ prompt: { kind: 'xml', tag: 'q' } })
    expect(config).toEqual({ prompt: { kind: 'tag', tag: 'q', join: '\n\n' }, candidate: { kind: 'answer' } })
    expect(extractPrompt('sys <q>Ask</q>', config.prompt)).toBe('Ask')
    expect(extractPrompt('sys <q>Ask</q>', { kind: 'identity' })).toBe('sys <q>Ask</q>')
    expect(extractCandidate('<think>x</think>y', { kind: 'identity' })).toBe('<think>x</think>y')
    expect(extractCandidate('<think>x</think>y', config.candidate)).toBe('y')
    expect(parseExtraction()).toEqual({ prompt: { kind: 'identity' }, candidate: { kind: 'answer' } })
    expect(() => parseExtraction({ prompt: { kind: 'regex', pattern: '(' } })).toThrow(/regular expression/)
    expect(() => parseExtraction({ candidate: { kind: 'tag' } })).toThrow()
  })

  it('the verifier grades the extracted prompt and answer', async () => {
    const request = await buildVerifierRequest(
      {
        item: { ...item, prompt: 'noise <q>Ask me</q>' },
        candidate: { ...c1, text: '<think>SECRET-THOUGHT</think><answer>Final.</answer>' },
        rubric: base(),
        vote: 0,
        seed: 1,
      },
      { locale: 'en', extraction: parseExtraction({ prompt: { kind: 'tag', tag: 'q' } }) },
    )
    const user = request.messages[1]!.content
    expect(user).toContain('Ask me')
    expect(user).not.toContain('noise')
    expect(user).toContain('Final.')
    expect(user).not.toContain('SECRET-THOUGHT')
  })
})

describe('rubricScore', () => {
  it('is the weight-normalised mean on the explicit scale', () => {
    expect(rubricScore({ c1: 5, c2: 2 }, rubric21()).score).toBeCloseTo(0.8, 12)
    // 1 of 5 is 0.2, never 1.0 (autosr §8.1)
    expect(rubricScore({ c1: 1, c2: 0 }, rubric21()).score).toBeCloseTo(2 / 15, 12)
    expect(rubricScore({ c1: 2.5, c2: 5 }, rubric21()).score).toBeCloseTo(2 / 3, 12)
  })

  it('skips N/A when allowed, counts it as 0 otherwise; an all-N/A rubric scores 0 and is flagged', () => {
    expect(rubricScore({ c1: null, c2: 4 }, rubric21(true))).toEqual({ score: 0.8, graded: 1, na: 1, allNa: false })
    expect(rubricScore({ c1: null, c2: 4 }, rubric21(false)).score).toBeCloseTo(0.8 / 3, 12)
    expect(rubricScore({ c1: null }, rubric21(true))).toEqual({ score: 0, graded: 0, na: 2, allNa: true })
    expect(rubricScore({}, rubric21(false))).toEqual({ score: 0, graded: 0, na: 2, allNa: true })
  })

  it('uses uniform weights when they sum to 0 and refuses grades off the scale', () => {
    const zero = SearchRubric.parse({ ...rubric21(), criteria: rubric21().criteria.map((c) => ({ ...c, weight: 0 })) })
    expect(rubricScore({ c1: 5, c2: 0 }, zero).score).toBeCloseTo(0.5, 12)
    expect(() => rubricScore({ c1: 6, c2: 0 }, rubric21())).toThrow(RangeError)
    expect(() => rubricScore({ c1: -1, c2: 0 }, rubric21())).toThrow(RangeError)
  })

  it('meanGrades averages the non-null votes per criterion', () => {
    expect(
      meanGrades(
        [
          { c1: 4, c2: null },
          { c1: 5, c2: null },
          { c1: null, c2: null },
        ],
        rubric21(),
      ),
    ).toEqual({ c1: 4.5, c2: null })
  })
})

describe('prompts', () => {
  it('state the explicit integer scale, in both locales', async () => {
    for (const locale of ['en', 'zh'] as const) {
      const request = await buildVerifierRequest({ item, candidate: c1, rubric: base(), vote: 0, seed: 1 }, { locale })
      const text = request.messages.map((m) => m.content).join('\n')
      expect(text).toContain(locale === 'en' ? 'integer grade from 0 to 10' : '0 到 10')
      expect(text).not.toMatch(/\{\{\w+\}\}/)
      const init = await buildInitializerRequest(item, { seed: 1, locale, gradeMax: 7 })
      expect(init.messages[0]!.content).toContain(
        locale === 'en' ? 'from 0 (not met at all) to 7' : '0（完全未满足）到 7',
      )
      const proposal = await buildProposerRequest(
        { item, rubric: base(), mode: 'decompose', top: c1, runnerUp: c2, seed: 1 },
        { locale },
      )
      expect(proposal.messages[0]!.content).toMatch(/0 (?:to|到) 10/)
    }
  })

  it('verifier: stable part first (system, rubric, prompt), candidate in data markers, vote, seed last', async () => {
    const a = await buildVerifierRequest({ item, candidate: c1, rubric: base(), vote: 0, seed: 11 }, { locale: 'en' })
    const b = await buildVerifierRequest({ item, candidate: c2, rubric: base(), vote: 1, seed: 12 }, { locale: 'en' })
    expect(a.messages[0]).toEqual(b.messages[0])
    const [userA, userB] = [a.messages[1]!.content, b.messages[1]!.content]
    const sharedPart = userA.slice(0, userA.indexOf('The answer to grade'))
    expect(userB.startsWith(sharedPart)).toBe(true)
    expect(sharedPart).toContain('- task_fit (factual, weight 0.350)')
    expect(sharedPart).toContain('N/A is allowed')
    expect(sharedPart).toContain(item.prompt)
    const boundary = [...userA.matchAll(/<<<DATA-([0-9a-f]{16})\n/g)].at(-1)![1]
    expect(userA).toContain(`<<<DATA-${boundary}\n${c1.text}\nDATA-${boundary}>>>`)
    expect(userA.indexOf('pass 0 (seed 11)')).toBeGreaterThan(userA.indexOf(c1.text))
    expect(userB).toContain('pass 1 (seed 12)')
  })

  it('verifier: votes of one candidate are distinct questions; N/A forbidden is said so', async () => {
    const rubric = SearchRubric.parse({ ...base(), grading_protocol: { grade_max: 10, allow_na: false, num_votes: 3 } })
    const votes = await Promise.all(
      [0, 1, 2].map((vote) => buildVerifierRequest({ item, candidate: c1, rubric, vote, seed: 5 }, { locale: 'en' })),
    )
    expect(new Set(votes.map((request) => request.messages[1]!.content)).size).toBe(3)
    expect(votes[0]!.messages[1]!.content).toContain('N/A is not allowed')
  })

  it("proposer: every mode contract is in the prompt, noting that the order is the current rubric's", async () => {
    for (const locale of ['en', 'zh'] as const) {
      const request = await buildProposerRequest(
        { item, rubric: base(), mode: 'anti_fluff', top: c1, runnerUp: c2, seed: 1 },
        { locale },
      )
      const colon = locale === 'en' ? ':' : '：'
      for (const mode of MUTATION_MODES) expect(request.messages[0]!.content).toContain(`- ${mode}${colon}`)
      expect(request.messages[1]!.content).toContain('anti_fluff')
    }
    const en = await buildProposerRequest(
      { item, rubric: base(), mode: 'anti_fluff', top: c1, runnerUp: c2, seed: 1 },
      { locale: 'en' },
    )
    expect(en.messages[0]!.content).toContain('not from ground truth')
    expect(en.messages[1]!.content).toContain('(not ground truth)')
  })

  it('honours prompt overrides', async () => {
    const request = await buildVerifierRequest(
      { item, candidate: c1, rubric: base(), vote: 0, seed: 1 },
      { locale: 'en', prompts: { 'en/search-verifier.system': 'Grade 0..{{grade_max}} only.' } },
    )
    expect(request.messages[0]!.content).toBe('Grade 0..10 only.')
  })
})

describe('parsers repair what they can and refuse the rest', () => {
  it('initializer: fences, trailing commas, string criteria, missing ids/texts, string weights; renormalised', () => {
    const criteria = parseInitializerReply(
      'Here you go:\n```json\n{"criteria": ["Is correct.", {"id": "clear writing", "description": "Clear.", ' +
        '"weight": "2"}, {"criterion_id": "x", "title": "Cites", "criterion_type": "FACTUAL",},]}\n```',
    )
    expect(criteria.map((c) => c.criterion_id)).toEqual(['criterion_1', 'clear_writing', 'x'])
    expect(criteria.map((c) => c.text)).toEqual(['Is correct.', 'Clear.', 'Cites'])
    expect(criteria.map((c) => c.weight)).toEqual([0.25, 0.5, 0.25])
    expect(criteria[2]!.criterion_type).toBe('factual')
    expect(
      parseInitializerReply(
        '{"rubric": {"criteria": {"a": "A.", "b": "B.", "c": {"text": "C.", "check_points": "one"}}}}',
      )[2],
    ).toMatchObject({ criterion_id: 'c', check_points: ['one'] })
  })

  it('initializer: refuses non-JSON, too few criteria, non-positive weights; takes the first of too many', () => {
    const refused = (text: string) => {
      try {
        parseInitializerReply(text)
      } catch (error) {
        expect(error).toBeInstanceOf(LlmError)
        expect((error as LlmError).kind).toBe('invalid_reply')
        return (error as LlmError).message
      }
      throw new Error(`accepted ${text}`)
    }
    expect(refused('Let me think about this.')).toMatch(/not JSON|wrong shape/)
    expect(refused('{"criteria": ["A", "B"]}')).toMatch(/2 criteria; expected 3 to 6/)
    // More than asked for is taken as far as it is valid: the first six.
    const taken = parseInitializerReply(JSON.stringify({ criteria: ['a', 'b', 'c', 'd', 'e', 'f', 'g'] }))
    expect(taken.map((criterion) => criterion.text)).toEqual(['a', 'b', 'c', 'd', 'e', 'f'])
    // A new rubric's repeated id is told apart, not refused: it has no parent whose ids it must match.
    const told = parseInitializerReply('{"criteria": [{"id": "a", "text": "A"}, {"id": "a", "text": "B"}, "C"]}')
    expect(told.map((criterion) => criterion.criterion_id).slice(0, 2)).toEqual(['a', 'a_2'])
    expect(refused('{"criteria": [{"text": "A", "weight": 0}, "B", "C"]}')).toMatch(/weight/)
    expect(refused('{"criteria": [{"text": "A", "weight": "heavy"}, "B", "C"]}')).toMatch(/weight/)
    expect(refused('{"rubric": {}}')).toMatch(/no criteria/)
  })

  it('proposer: validates the child and its mode contract', () => {
    const parent = base()
    const reply = (criteria: unknown[]) => JSON.stringify({ rubric: { criteria } })
    const kept = parent.criteria.map((c) => ({ ...c }))
    expect(() => parseProposerReply(reply(kept), parent, 'raise_bar')).toThrow(/unchanged/)
    expect(() =>
      parseProposerReply(
        reply(kept.map((c, i) => (i === 0 ? { ...c, text: 'Changed.' } : c))),
        parent,
        'weight_perturb',
      ),
    ).toThrow(/weight_perturb changed the id or text of "task_fit"/)
    expect(() =>
      parseProposerReply(reply(kept.map((c, i) => (i === 0 ? { ...c, text: 'Tighter.' } : c))), parent, 'decompose'),
    ).toThrow(/split/)
    expect(() =>
      parseProposerReply(reply([...kept, { criterion_id: 'x', text: 'Concise.' }]), parent, 'anti_fluff'),
    ).toThrow(/negative examples/)
    expect(() =>
      parseProposerReply(reply([...kept, { ...kept[0], text: 'dup' }]), parent, 'counterexample_trigger'),
    ).toThrow(/twice/)
    const child = parseProposerReply(
      reply([
        ...kept,
        { criterion_id: 'no_fluff', text: 'No filler.', weight: 0.2, negative_examples: ['in conclusion'] },
      ]),
      parent,
      'anti_fluff',
    )
    expect(child.reduce((sum, c) => sum + c.weight, 0)).toBeCloseTo(1, 12)
    expect(
      parseProposerReply(reply(kept.map((c, i) => (i === 0 ? { ...c, weight: 0.9 } : c))), parent, 'weight_perturb'),
    ).toHaveLength(4)
    expect(
      parseProposerReply(reply([{ criterion_id: 'only', text: 'x' }]), parent, 'decompose', {
        enforceModeContract: false,
      }),
    ).toHaveLength(1)
    expect(modeContractViolation(parent.criteria, parent.criteria, 'factual_focus')).toMatch(/unchanged/)
  })

  it('sameCriteria: the same criteria at any weight scale; a changed field, weight share or order is a change', () => {
    const criteria = base().criteria
    const scaled = criteria.map((criterion) => ({ ...criterion, weight: criterion.weight * 7 }))
    expect(sameCriteria(criteria, scaled)).toBe(true)
    const changes: Partial<Criterion>[] = [
      { criterion_id: 'other' },
      { text: 'Other text.' },
      { criterion_type: criteria[0]!.criterion_type === 'format' ? 'style' : 'format' },
      { check_points: [...criteria[0]!.check_points, 'one more'] },
      { positive_examples: ['a good answer'] },
      { negative_examples: ['a bad answer'] },
      { weight: criteria[0]!.weight * 2 },
    ]
    for (const change of changes) {
      const changed = criteria.map((criterion, index) => (index === 0 ? { ...criterion, ...change } : criterion))
      expect(sameCriteria(criteria, changed), JSON.stringify(change)).toBe(false)
    }
    expect(sameCriteria(criteria, [...criteria].reverse())).toBe(false)
    expect(sameCriteria(criteria, criteria.slice(1))).toBe(false)
  })

  it('a proposer child is taken as parsed; a rubric without an id or criteria is refused', () => {
    const { criteria, grading_protocol } = base()
    const child = rubricFromParsedParts({ rubric_id: 'p1_r0_m1', criteria, grading_protocol, metadata: {} })
    expect(isParsedSearchRubric(child)).toBe(true)
    expect(() => rubricFromParsedParts({ ...child, rubric_id: '' })).toThrow(RangeError)
    expect(() => rubricFromParsedParts({ ...child, criteria: [] })).toThrow(RangeError)
  })

  it(
    'verifier: three shapes, numeric strings, "7/10", "n/a"; refuses off-scale, fractional, missing, unknown, and ' +
      'N/A when not allowed',
    () => {
      const rubric = SearchRubric.parse({
        rubric_id: 'r',
        criteria: [
          { criterion_id: 'a', text: 'A' },
          { criterion_id: 'b', text: 'B' },
        ],
        grading_protocol: { grade_max: 10, allow_na: true, num_votes: 1 },
      })
      expect(parseVerifierReply('```json\n{"grades": {"a": 7, "b": "n/a",}}\n```', rubric)).toEqual({ a: 7, b: null })
      expect(
        parseVerifierReply('{"grades": [{"criterion_id": "a", "grade": "7/10"}, {"id": "b", "grade": "3"}]}', rubric),
      ).toEqual({ a: 7, b: 3 })
      expect(parseVerifierReply('{"a": 10, "b": {"grade": 0}, "reason": "ok"}', rubric)).toEqual({ a: 10, b: 0 })
      const refused = (text: string, r = rubric) => failureMessage(() => parseVerifierReply(text, r))
      expect(refused('{"grades": {"a": 7.5, "b": 1}}')).toMatch(/not an integer in 0..10/)
      expect(refused('{"grades": {"a": 11, "b": 1}}')).toMatch(/not an integer in 0..10/)
      expect(refused('{"grades": {"a": -1, "b": 1}}')).toMatch(/not an integer/)
      expect(refused('{"grades": {"a": "4/5", "b": 1}}')).toMatch(/not on the 0..10 scale/)
      expect(refused('{"grades": {"a": true, "b": 1}}')).toMatch(/not a number/)
      expect(refused('{"grades": {"a": 1}}')).toMatch(/no grade for criterion "b"/)
      expect(refused('{"grades": {"a": 1, "b": 1, "c": 2}}')).toMatch(/unknown criterion "c"/)
      expect(
        refused('{"grades": [{"id": "a", "grade": 1}, {"id": "a", "grade": 2}, {"id": "b", "grade": 2}]}'),
      ).toMatch(/twice/)
      const strict = SearchRubric.parse({
        ...rubric,
        grading_protocol: { grade_max: 10, allow_na: false, num_votes: 1 },
      })
      expect(refused('{"grades": {"a": null, "b": 1}}', strict)).toMatch(/does not allow N\/A/)
    },
  )

  it('judge: A/B/tie in many spellings, autosr numbers; refuses booleans and other values', () => {
    expect(parseJudgeReply('{"winner": "A"}')).toBe(1)
    expect(parseJudgeReply('Sure. {"winner": "b", "reason": "more complete"} Hope this helps')).toBe(-1)
    expect(parseJudgeReply('{"winner": "Answer A"}')).toBe(1)
    expect(parseJudgeReply('{"preference": -1}')).toBe(-1)
    expect(parseJudgeReply('{"winner": "Tie"}')).toBe(0)
    expect(parseJudgeReply('{"preference": 0}')).toBe(0)
    for (const bad of ['{"winner": true}', '{"preference": 2}', '{"winner": "maybe"}', '{}', 'B']) {
      expect(failureMessage(() => parseJudgeReply(bad))).toBeTruthy()
    }
  })
})

function failureMessage(run: () => unknown): string {
  try {
    run()
  } catch (error) {
    expect(error).toBeInstanceOf(LlmError)
    expect((error as LlmError).kind).toBe('invalid_reply')
    return (error as LlmError).message
  }
  throw new Error('expected an invalid_reply')
}

describe('mock roles (MockChatModel through the real parsing path)', () => {
  it('initializer: autosr heuristic criteria, stable id, the explicit protocol', async () => {
    const rubric = await new LlmRubricInitializer(mock, { gradeMax: 10, numVotes: 3 }).initialize(item, { seed: 7 })
    expect(rubric.rubric_id).toBe('p1_r0')
    expect(rubric.criteria.map((c) => [c.criterion_id, c.weight])).toEqual([
      ['task_fit', 0.35],
      ['structure', 0.25],
      ['specificity', 0.25],
      ['safety_style', 0.15],
    ])
    expect(rubric.criteria[0]!.check_points).toEqual(['debugging', 'fails', 'flaky', 'integration'])
    expect(rubric.grading_protocol).toEqual({ grade_max: 10, allow_na: true, num_votes: 3 })
    expect(rubric.metadata).toMatchObject({ origin: 'initializer', model: 'mock:mock-heuristic-1' })
    expect(promptKeywords('Write a haiku about autumn leaves, autumn rain.')).toEqual([
      'autumn',
      'about',
      'haiku',
      'leaves',
    ])
    expect(promptKeywords('写一首诗')).toEqual([expect.stringMatching(/^[0-9a-f]{8}$/)])
  })

  it('are deterministic for a seed', async () => {
    const run = async (seed: number) => {
      const rubric = await new LlmRubricInitializer(mock).initialize(item, { seed })
      const children = []
      for (const mode of MUTATION_MODES)
        children.push(await new LlmRubricProposer(mock).propose({ item, rubric, mode, top: c1, runnerUp: c2, seed }))
      const grades = await new LlmVerifier(mock, { mockNoise: 0.3 }).grade({
        item,
        candidate: c1,
        rubric,
        vote: 1,
        seed,
      })
      return { rubric, children, grades }
    }
    expect(await run(7)).toEqual(await run(7))
    const [a, b] = [await run(7), await run(8)]
    expect(a.children[5]!.criteria.map((c) => c.weight)).not.toEqual(b.children[5]!.criteria.map((c) => c.weight))
  })

  it('verifier: integer grades from check points, negative examples and length; noise only from the seed', async () => {
    const rubric = base()
    const grade = (candidate: Candidate, vote = 0, seed = 7, mockNoise = 0) =>
      new LlmVerifier(mock, { mockNoise }).grade({ item, candidate, rubric, vote, seed })
    // no check points: length, 31 of 50 words
    expect(await grade(c1)).toEqual({ task_fit: 5, structure: 10, specificity: 10, safety_style: 6 })
    expect((await grade(c2)).safety_style).toBe(0)
    expect(await grade(c3)).toEqual({ task_fit: 5, structure: 0, specificity: 0, safety_style: 1 })
    expect(await grade(c1, 0)).toEqual(await grade(c1, 1))
    const noisy = await Promise.all([0, 1, 2, 3, 4, 5].map((vote) => grade(c1, vote, 7, 0.5)))
    expect(new Set(noisy.map((g) => JSON.stringify(g))).size).toBeGreaterThan(1)
    expect(await grade(c1, 3, 7, 0.5)).toEqual(noisy[3])
    for (const grades of noisy)
      for (const value of Object.values(grades))
        expect(Number.isInteger(value) && value! >= 0 && value! <= 10).toBe(true)
  })
})

describe('proposer modes do what they say', () => {
  const propose = (mode: MutationMode, rubric = base(), seed = 7) =>
    new LlmRubricProposer(mock).propose({ item, rubric, mode, top: c1, runnerUp: c2, seed })
  const sum = (rubric: SearchRubric) => rubric.criteria.reduce((total, c) => total + c.weight, 0)

  it('decompose splits one criterion in two, in place, with equal halves of its weight', async () => {
    const parent = base()
    const child = await propose('decompose', parent)
    expect(child.criteria).toHaveLength(5)
    const ids = child.criteria.map((c) => c.criterion_id)
    const longest = parent.criteria.reduce((a, b) => (b.text.length > a.text.length ? b : a))
    expect(ids).not.toContain(longest.criterion_id)
    const halves = child.criteria.filter((c) => c.criterion_id.startsWith(`${longest.criterion_id}_d`))
    expect(halves).toHaveLength(2)
    expect(halves[0]!.weight).toBeCloseTo(halves[1]!.weight, 12)
    expect(`${halves[0]!.text} ${halves[1]!.text}`.length).toBeGreaterThan(10)
    expect(sum(child)).toBeCloseTo(1, 12)
  })

  it('weight_perturb keeps ids and texts and moves weights within the contract', async () => {
    const parent = base()
    const child = await propose('weight_perturb', parent)
    expect(child.criteria.map((c) => [c.criterion_id, c.text])).toEqual(
      parent.criteria.map((c) => [c.criterion_id, c.text]),
    )
    expect(child.criteria.map((c) => c.weight)).not.toEqual(parent.criteria.map((c) => c.weight))
    expect(sum(child)).toBeCloseTo(1, 12)
  })

  it('anti_fluff adds a criterion with negative examples, then strengthens it instead of adding another', async () => {
    const once = await propose('anti_fluff')
    const added = once.criteria.find((c) => c.criterion_id === 'anti_fluff_1')!
    expect(added.negative_examples).toContain('in conclusion')
    expect(once.criteria).toHaveLength(5)
    const twice = await propose('anti_fluff', once)
    expect(twice.criteria).toHaveLength(5)
    expect(twice.criteria.find((c) => c.criterion_id === 'anti_fluff_1')!.negative_examples.length).toBe(
      added.negative_examples.length + 1,
    )
  })

  it(
    'raise_bar tightens the heaviest criterion; factual_focus weighs factual and reasoning up; ' +
      'counterexample_trigger asks for limits',
    async () => {
      const parent = base()
      const raised = await propose('raise_bar', parent)
      expect(raised.criteria[0]!.text).toMatch(/require verifiable details or concrete evidence\.$/)
      expect(raised.criteria[0]!.weight).toBeGreaterThan(parent.criteria[0]!.weight)
      const focused = await propose('factual_focus', parent)
      expect(focused.criteria.find((c) => c.criterion_id === 'task_fit')!.weight).toBeGreaterThan(0.35)
      expect(focused.criteria.find((c) => c.criterion_id === 'structure')!.weight).toBeLessThan(0.25)
      const counter = await propose('counterexample_trigger', parent)
      expect(counter.criteria.at(-1)).toMatchObject({
        criterion_id: 'counterexample_1',
        criterion_type: 'reasoning',
        check_points: ['however', 'limit', 'trade-off', 'risk'],
      })
    },
  )

  it('child ids are <base>_m<hash8>: they do not grow along a lineage, and record the parent and mode', async () => {
    let rubric = base()
    for (let generation = 0; generation < 12; generation++) {
      const mode = MUTATION_MODES[generation % MUTATION_MODES.length]!
      const child = await propose(mode, rubric, generation)
      expect(child.rubric_id).toMatch(/^p1_r0_m[0-9a-f]{8}$/)
      expect(child.metadata).toMatchObject({ origin: 'proposer', mode, parent_id: rubric.rubric_id })
      expect(child.grading_protocol).toEqual(rubric.grading_protocol)
      rubric = child
    }
    expect(rubricBaseId('p1_r0_m0123abcd_m89abcdef')).toBe('p1_r0')
  })

  it('the mock template is pure given its PRNG', () => {
    const criteria = heuristicCriteria(item.prompt)
    expect(mutateCriteria(criteria, 'weight_perturb', seededRandom('x', 1))).toEqual(
      mutateCriteria(criteria, 'weight_perturb', seededRandom('x', 1)),
    )
    expect(criteria[0]!.weight).toBe(0.35) // the input is not mutated
  })

  it('a child failing validation is an invalid reply, asked for again', async () => {
    const parent = base()
    const good = JSON.stringify({
      rubric: { criteria: parent.criteria.map((c, i) => (i === 0 ? { ...c, weight: 0.5 } : c)) },
    })
    const model = scripted(JSON.stringify({ rubric: { criteria: parent.criteria } }), good)
    const child = await new LlmRubricProposer(model, { retry }).propose({
      item,
      rubric: parent,
      mode: 'weight_perturb',
      top: c1,
      runnerUp: c2,
      seed: 1,
    })
    expect(model.requests).toHaveLength(2)
    expect(child.criteria[0]!.weight).toBeCloseTo(0.5 / 1.15, 12)
    const stubborn = scripted(JSON.stringify({ rubric: { criteria: parent.criteria } }))
    expect(
      await failureOf(
        new LlmRubricProposer(stubborn, { retry }).propose({
          item,
          rubric: parent,
          mode: 'raise_bar',
          top: c1,
          runnerUp: c2,
          seed: 1,
        }),
      ),
    ).toMatchObject({ kind: 'invalid_reply' })
    expect(stubborn.requests).toHaveLength(3)
  })
})

describe('presets', () => {
  const rubricJson = (id: string) => ({
    rubric_id: id,
    criteria: [{ criterion_id: 'c', text: 'Correct.', weight: 2, criterion_type: 'unknown-kind' }],
    grading_protocol: { num_votes: 3, allow_na: false, vote_method: 'majority', strict_json: true },
  })

  it('reads the three autosr shapes; autosr protocols get the search scale', () => {
    const fromOutput = parsePresetRubrics(
      { best_rubrics: [{ prompt_id: 'p1', rubric: rubricJson('a') }], best_scores: { p1: 0.7 } },
      { gradeMax: 5 },
    )
    expect(fromOutput.get('p1')).toMatchObject({
      rubric_id: 'a',
      grading_protocol: { grade_max: 5, allow_na: false, num_votes: 3 },
      criteria: [{ criterion_type: null }],
    })
    expect([
      ...parsePresetRubrics({ rubrics: [{ prompt_id: '__default__', rubric: rubricJson('d') }] }).keys(),
    ]).toEqual(['__default__'])
    const byId = parsePresetRubrics({
      p1: rubricJson('x'),
      p2: { criteria: [{ criterion_id: 'c', text: 'T' }] },
      note: 'ignored',
    })
    expect([...byId.keys()]).toEqual(['p1', 'p2'])
    expect(byId.get('p2')!.rubric_id).toBe('p2_preset')
    expect(() => parsePresetRubrics({ rubrics: [{ prompt_id: 'p1', rubric: { criteria: [] } }] })).toThrow(
      /preset rubric for "p1"/,
    )
    expect(() => parsePresetRubrics({ rubrics: [{ rubric: rubricJson('a') }] })).toThrow(/prompt_id/)
  })

  it('looks up the prompt id, then __default__; strict refuses a miss, otherwise the fallback answers', async () => {
    const presets = parsePresetRubrics({ p1: rubricJson('own'), __default__: rubricJson('shared') })
    const initializer = new PresetInitializer(presets, new LlmRubricInitializer(mock))
    const own = await initializer.initialize(item, { seed: 1 })
    expect(own).toMatchObject({ rubric_id: 'own', metadata: { origin: 'preset_initializer', preset_prompt_id: 'p1' } })
    own.criteria[0]!.text = 'mutated'
    expect(presets.get('p1')!.criteria[0]!.text).toBe('Correct.') // a deep copy
    expect(await initializer.initialize({ ...item, prompt_id: 'p9' }, { seed: 1 })).toMatchObject({
      rubric_id: 'p9_r0',
      metadata: { preset_prompt_id: '__default__', preset_rubric_id: 'shared' },
    })
    const onlyP1 = parsePresetRubrics({ p1: rubricJson('own') })
    expect(
      (
        await new PresetInitializer(onlyP1, new LlmRubricInitializer(mock)).initialize(
          { ...item, prompt_id: 'p9' },
          { seed: 1 },
        )
      ).rubric_id,
    ).toBe('p9_r0')
    await expect(
      new PresetInitializer(onlyP1, new LlmRubricInitializer(mock), { strict: true }).initialize(
        { ...item, prompt_id: 'p9' },
        { seed: 1 },
      ),
    ).rejects.toThrow(/no preset rubric for prompt "p9"/)
  })
})

describe('judges', () => {
  const labelled = (id: string, text: string, label: Candidate['label'], source = 'unknown'): Candidate => ({
    candidate_id: id,
    text,
    source,
    label,
    metadata: {},
  })

  it('reconcile keeps agreeing verdicts and turns disagreement into a tie', () => {
    expect(reconcile(1, -1)).toBe(1)
    expect(reconcile(-1, 1)).toBe(-1)
    expect(reconcile(0, 0)).toBe(0)
    expect(reconcile(1, 1)).toBe(0)
    expect(reconcile(1, 0)).toBe(0)
  })

  it('LlmPairJudge asks both orders and returns 0 when they disagree (a model that always says A)', async () => {
    const model = scripted('{"winner": "A"}')
    const judge = new LlmPairJudge(model, { retry })
    expect(await judge.compare({ item, left: c1, right: c2 })).toBe(0)
    expect(model.requests).toHaveLength(2)
    const shown = model.requests.map((request) => request.task === 'search_judge' && judgedAnswers(request))
    expect(shown).toEqual([
      [c1.text, c2.text],
      [c2.text, c1.text],
    ])
    expect(model.requests[0]!.messages[1]!.content.indexOf(c1.text)).toBeLessThan(
      model.requests[0]!.messages[1]!.content.indexOf(c2.text),
    )
    expect(model.requests[1]!.messages[1]!.content.indexOf(c2.text)).toBeLessThan(
      model.requests[1]!.messages[1]!.content.indexOf(c1.text),
    )
    expect(judge.stats()).toEqual({
      pairs: 1,
      consistent: 0,
      inconsistent: 1,
      decisive: 0,
      firstPositionWins: 2,
      secondPositionWins: 0,
      cacheHits: 0,
    })
  })

  it('LlmPairJudge: consistent preference, caches pairs in both orientations, skips identical texts', async () => {
    const preferC1: ChatModel & { requests: ChatRequest[] } = {
      id: 'prefers-c1',
      requests: [],
      async complete(request) {
        this.requests.push(request)
        return {
          text: JSON.stringify({ winner: judgedAnswers(request)[0] === c1.text ? 'A' : 'B' }),
          model: 'x',
          usage: { prompt_tokens: 0, completion_tokens: 0 },
        }
      },
    }
    const judge = new LlmPairJudge(preferC1, { retry })
    expect(await judge.compare({ item, left: c1, right: c2 })).toBe(1)
    expect(await judge.compare({ item, left: c2, right: c1 })).toBe(-1)
    expect(await judge.compare({ item, left: c3, right: c1 })).toBe(-1)
    expect(await judge.compare({ item, left: c3, right: { ...c3, candidate_id: 'c3-copy' } })).toBe(0)
    expect(preferC1.requests).toHaveLength(4)
    expect(judge.stats()).toMatchObject({
      pairs: 2,
      consistent: 2,
      inconsistent: 0,
      decisive: 2,
      firstPositionWins: 2,
      secondPositionWins: 2,
      cacheHits: 1,
    })
  })

  it('the mock LLM judge is position-consistent', async () => {
    const judge = new LlmPairJudge(mock)
    expect(await judge.compare({ item, left: c1, right: c3 })).toBe(1)
    expect(await judge.compare({ item, left: c2, right: c3 })).toBe(-1) // boilerplate loses
    expect(judge.stats().inconsistent).toBe(0)
  })

  it('RankJudge: lower rank wins, equal ranks tie, a missing rank goes to the fallback', async () => {
    const fallback: PreferenceJudge = { compare: async () => -1 }
    const judge = new RankJudge(fallback)
    const [a, b, c, d] = [
      labelled('a', 'x', { rank: 1 }),
      labelled('b', 'y', { rank: 2 }),
      labelled('c', 'z', { rank: 2 }),
      labelled('d', 'w', {}),
    ]
    expect(await judge.compare({ item, left: a, right: b })).toBe(1)
    expect(await judge.compare({ item, left: b, right: a })).toBe(-1)
    expect(await judge.compare({ item, left: b, right: c })).toBe(0)
    expect(await judge.compare({ item, left: a, right: d })).toBe(-1)
    expect(await new RankJudge().compare({ item, left: a, right: d })).toBe(0)
  })

  it('QualityJudge: higher quality wins; HeuristicJudge: quality, else length/structure, never source', async () => {
    const [hi, lo] = [
      labelled('a', 'short', { quality: 0.9 }),
      labelled('b', 'a much longer answer with more words', { quality: 0.2 }),
    ]
    expect(await new QualityJudge().compare({ item, left: hi, right: lo })).toBe(1)
    expect(await new QualityJudge().compare({ item, left: hi, right: { ...lo, label: { quality: 0.9 } } })).toBe(0)
    const heuristic = new HeuristicJudge()
    expect(await heuristic.compare({ item, left: hi, right: lo })).toBe(1)
    const [strong, base_] = [labelled('s', 'same text', {}, 'strong'), labelled('b', 'same text', {}, 'base')]
    expect(await heuristic.compare({ item, left: strong, right: base_ })).toBe(0)
    expect(await heuristic.compare({ item, left: c3, right: c1 })).toBe(-1)
    expect(textStructureScore('1. a\n2. b\n\nmore')).toBeGreaterThan(textStructureScore('1 a 2 b more'))
  })

  it('chooseJudge: rank when all candidates have one (even on llm), else quality, else LLM judge or heuristic', () => {
    const llmJudge = new LlmPairJudge(mock)
    const withLabels = (labels: Candidate['label'][]) => [
      PromptItem.parse({
        ...item,
        candidates: labels.map((label, i) => ({ candidate_id: `c${i}`, text: `t${i}`, label })),
      }),
    ]
    expect(chooseJudge(withLabels([{ rank: 1 }, { rank: 2, quality: 0.1 }]), { backend: 'llm', llmJudge }).kind).toBe(
      'rank',
    )
    expect(
      chooseJudge(withLabels([{ quality: 0.3 }, { quality: 0.1, rank: 1 }]), { backend: 'llm', llmJudge }).kind,
    ).toBe('quality')
    expect(chooseJudge(withLabels([{ quality: 0.3 }, {}]), { backend: 'llm', llmJudge })).toMatchObject({
      kind: 'llm',
      judge: llmJudge,
    })
    expect(chooseJudge({ prompts: withLabels([{ rank: 1 }, {}]) }, { backend: 'mock' }).kind).toBe('heuristic')
    expect(() => chooseJudge(withLabels([{}, {}]), { backend: 'llm' })).toThrow(/needs an LLM judge/)
    expect(chooseJudge(withLabels([{ rank: 1 }, { rank: 2 }]), { backend: 'llm' }).kind).toBe('rank')
  })
})
