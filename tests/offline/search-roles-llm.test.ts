import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { MockChatModel } from '../../src/llm/mock.ts'
import { OpenAIChatModel } from '../../src/llm/openai.ts'
import type { ChatModel, ChatRequest } from '../../src/llm/types.ts'
import {
  createSearchRoles,
  LlmPairJudge,
  LlmRubricInitializer,
  LlmRubricProposer,
  LlmVerifier,
  PresetInitializer,
} from '../../src/search/roles/index.ts'
import { MUTATION_MODES, PreferenceDataset, type Candidate, type PromptItem } from '../../src/search/types.ts'
import { SearchRubric } from '../../src/schemas/search-rubric.ts'
import { startLlmStub, type ChatCompletionBody, type LlmStub } from '../support/llm-stub.ts'
import { roleOf, userOf } from '../support/search-stub.ts'

/** Distinctive label values: none may ever reach a message an LLM reads. */
const PLANTED = {
  id: 'ID-PLANTED',
  source: 'SRC-PLANTED-7f3a',
  ranks: [48613, 48614],
  qualities: [0.73196481, 0.28137265],
  metaLabel: 'LBL-PLANTED-chosen',
  metaRank: 'META-RANK-PLANTED',
  promptMeta: 'KEY-PLANTED',
}
const FORBIDDEN = [
  PLANTED.id,
  PLANTED.source,
  ...PLANTED.ranks.map(String),
  ...PLANTED.qualities.map(String),
  PLANTED.metaLabel,
  PLANTED.metaRank,
  PLANTED.promptMeta,
  'chosen',
  'rejected',
]

const dataset = PreferenceDataset.parse({
  prompts: [
    {
      prompt_id: 'p-leak',
      prompt: 'Explain how to roll back a failed database migration safely.',
      metadata: { answer_key: PLANTED.promptMeta },
      candidates: [
        {
          candidate_id: `${PLANTED.id}-1`,
          source: PLANTED.source,
          label: { rank: PLANTED.ranks[0], quality: PLANTED.qualities[0] },
          text:
            'First, stop writes. Second, restore the snapshot because the schema changed; for example, check each ' +
            'step in detail.',
        },
        {
          candidate_id: `${PLANTED.id}-2`,
          source: PLANTED.source,
          label: { rank: PLANTED.ranks[1], quality: PLANTED.qualities[1] },
          text:
            '<think>The user wants rollback steps.</think><answer>Run the down migration, then verify the ' +
            'data.</answer>',
        },
        {
          candidate_id: `${PLANTED.id}-3`,
          source: 'rejected',
          label: {},
          metadata: { label: PLANTED.metaLabel, rank: PLANTED.metaRank },
          text: 'In conclusion, as an AI language model I cannot provide that.',
        },
      ],
    },
  ],
})
const item = dataset.prompts[0]!
const [c1, c2, c3] = item.candidates as [Candidate, Candidate, Candidate]
const noSleep = async () => {}
const retry = { maxAttempts: 3, sleep: noSleep }

/** Wraps a model and keeps every request it is sent. */
function recording(inner: ChatModel): ChatModel & { requests: ChatRequest[] } {
  const requests: ChatRequest[] = []
  return {
    id: inner.id,
    requests,
    complete: (request) => {
      requests.push(request)
      return inner.complete(request)
    },
  }
}

function expectNoLabels(payloads: readonly string[]): void {
  expect(payloads.length).toBeGreaterThan(0)
  for (const payload of payloads)
    for (const forbidden of FORBIDDEN) expect(payload, `a payload contains "${forbidden}"`).not.toContain(forbidden)
}

/** Runs every role on every candidate and pair, every mutation mode. */
async function exerciseRoles(
  roles: ReturnType<typeof createSearchRoles>,
  subject: PromptItem = item,
): Promise<SearchRubric[]> {
  const rubric = await roles.initializer.initialize(subject, { seed: 3 })
  const rubrics = [rubric]
  const [a, b, c] = subject.candidates as [Candidate, Candidate, Candidate]
  for (const candidate of subject.candidates)
    for (const vote of [0, 1]) await roles.verifier.grade({ item: subject, candidate, rubric, vote, seed: 9 })
  for (const mode of MUTATION_MODES)
    rubrics.push(await roles.proposer.propose({ item: subject, rubric, mode, top: a, runnerUp: c, seed: 4 }))
  for (const [left, right] of [
    [a, b],
    [b, c],
    [c, a],
  ] as const)
    await roles.judge.compare({ item: subject, left, right })
  return rubrics
}

describe('no LLM-visible payload carries a source, rank, quality or label', () => {
  for (const locale of ['en', 'zh'] as const) {
    it(`every message and mock reply of every role (${locale})`, async () => {
      const model = recording(new MockChatModel())
      const roles = createSearchRoles({ backend: 'llm', model, dataset, locale, gradeMax: 10 })
      expect(roles.judgeChoice.kind).toBe('llm') // labels are incomplete: the LLM judge, which must not see them
      const rubrics = await exerciseRoles(roles)
      const kinds = new Set(model.requests.map((request) => request.task))
      expect([...kinds].sort()).toEqual(['search_initialize', 'search_judge', 'search_propose', 'search_verify'])
      expectNoLabels(model.requests.flatMap((request) => request.messages.map((message) => message.content)))
      expectNoLabels(model.requests.map((request) => String(request.mock?.({ noise: 0 }) ?? '')))
      expectNoLabels(rubrics.map((rubric) => JSON.stringify(rubric)))
    })
  }

  it('nor on the wire to an OpenAI-compatible server', async () => {
    const stub = await startLlmStub()
    try {
      stub.respondWith(cooperative)
      const model = new OpenAIChatModel({
        baseURL: stub.baseUrl,
        apiKey: 'k',
        model: 'stub-model',
        temperature: 0,
        maxTokens: 512,
        timeoutMs: 2_000,
      })
      await exerciseRoles(createSearchRoles({ backend: 'llm', model, dataset, retry }))
      expect(stub.requests.length).toBeGreaterThan(10)
      expectNoLabels(stub.requests.map((body) => JSON.stringify(body)))
    } finally {
      await stub.close()
    }
  })
})

// ---------------------------------------------------------------------------------------------
// A cooperative OpenAI-compatible model for the stub: it tells the four roles apart by their system prompts.

/** Answers each search role as a well-behaved model would; the judge prefers the answer that says "rollback plan". */
function cooperative(body: ChatCompletionBody): string {
  const user = userOf(body)
  switch (roleOf(body)) {
    case 'initializer':
      return JSON.stringify({
        rubric: {
          criteria: [
            { criterion_id: 'correct', text: 'Steps are correct.', weight: 2, criterion_type: 'factual' },
            'Verifies the data afterwards.',
            { id: 'safe', text: 'Stops writes first.' },
          ],
        },
      })
    case 'proposer': {
      const current = JSON.parse(user.slice(user.indexOf('{'), user.indexOf('\n}\n') + 2)) as {
        criteria: { criterion_id: string; text: string; weight: number }[]
      }
      const mode = user.match(/^Mutation mode: (\w+)/m)?.[1]
      const criteria = current.criteria.map((criterion) => ({ ...criterion }))
      if (mode === 'weight_perturb') criteria[0]!.weight *= 1.15
      else if (mode === 'decompose')
        criteria.splice(
          0,
          1,
          { ...criteria[0]!, criterion_id: 'part_a' },
          { ...criteria[0]!, criterion_id: 'part_b', text: 'Second half.' },
        )
      else
        criteria.push({
          criterion_id: `added_${mode}`,
          text: 'No filler.',
          weight: 0.2,
          negative_examples: ['in conclusion'],
        } as never)
      return `Here is the rubric:\n${JSON.stringify({ rubric: { criteria } })}`
    }
    case 'verifier': {
      const ids = [...user.matchAll(/^- ([\w.:-]+) \(/gm)].map((match) => match[1]!)
      return JSON.stringify({ grades: Object.fromEntries(ids.map((id) => [id, 7])) })
    }
    case 'judge': {
      const a = user.indexOf('Answer A:')
      const b = user.indexOf('Answer B:')
      const hit = user.indexOf('rollback plan')
      return JSON.stringify({ winner: hit < 0 ? 'tie' : hit > a && hit < b ? 'A' : 'B', reason: 'stub' })
    }
    default:
      return '{}'
  }
}

describe('each role against an OpenAI-compatible stub: a non-JSON reply, then a good one', () => {
  let stub: LlmStub
  beforeAll(async () => {
    stub = await startLlmStub()
  })
  afterAll(() => stub.close())
  beforeEach(() => {
    stub.requests.length = 0
    stub.respondWith(cooperative)
    stub.script({ kind: 'content', text: 'Sure! Let me think about this carefully.' })
  })
  const model = () =>
    new OpenAIChatModel({
      baseURL: stub.baseUrl,
      apiKey: 'k',
      model: 'stub-model',
      temperature: 0,
      maxTokens: 512,
      timeoutMs: 2_000,
    })
  const rubric = SearchRubric.parse({
    rubric_id: 'p-leak_r0',
    criteria: [
      { criterion_id: 'correct', text: 'Steps are correct.', weight: 2 },
      { criterion_id: 'verify', text: 'Verifies the data.' },
    ],
    grading_protocol: { grade_max: 10, allow_na: true, num_votes: 1 },
  })

  it('initializer', async () => {
    const result = await new LlmRubricInitializer(model(), { retry }).initialize(item, { seed: 1 })
    expect(result.rubric_id).toBe('p-leak_r0')
    expect(result.criteria.map((c) => [c.criterion_id, c.weight])).toEqual([
      ['correct', 0.5],
      ['criterion_2', 0.25],
      ['safe', 0.25],
    ])
    expect(stub.requests).toHaveLength(2)
    expect(stub.requests[1]!.messages.slice(0, -2)).toEqual(stub.requests[0]!.messages)
    expect(stub.requests[1]!.messages.at(-1)!.content).toMatch(/^That reply was refused: initializer reply /)
    expect(stub.requests[0]!.response_format).toEqual({ type: 'json_object' })
  })

  it('proposer: a child equal to its parent is shown back with what was wrong, not asked the same again', async () => {
    // What Qwen2.5-Coder-1.5B did at temperature 0 in a search: the parent, unchanged, every time it was asked the
    // same; this stub answers the same until the request says so.
    const parent = JSON.stringify({ rubric: { criteria: rubric.criteria } })
    stub.script({ kind: 'content', text: parent })
    stub.respondWith((body) =>
      /returned the rubric unchanged/.test(body.messages.at(-1)!.content) ? cooperative(body) : parent,
    )
    const child = await new LlmRubricProposer(model(), { retry }).propose({
      item,
      rubric,
      mode: 'raise_bar',
      top: c1,
      runnerUp: c2,
      seed: 1,
    })
    expect(child.criteria).not.toEqual(rubric.criteria)
    // The prose reply, then the unchanged parent, then the child: each request the last one grown by two turns.
    expect(stub.requests).toHaveLength(3)
    expect(stub.requests[2]!.messages.slice(0, -2)).toEqual(stub.requests[1]!.messages)
    expect(stub.requests[2]!.messages.at(-2)).toEqual({ role: 'assistant', content: parent })
  })

  it('proposer', async () => {
    const child = await new LlmRubricProposer(model(), { retry }).propose({
      item,
      rubric,
      mode: 'decompose',
      top: c1,
      runnerUp: c2,
      seed: 1,
    })
    expect(child.criteria.map((c) => c.criterion_id)).toEqual(['part_a', 'part_b', 'verify'])
    expect(child.rubric_id).toMatch(/^p-leak_r0_m[0-9a-f]{8}$/)
    expect(stub.requests).toHaveLength(2)
  })

  it('verifier', async () => {
    expect(await new LlmVerifier(model(), { retry }).grade({ item, candidate: c2, rubric, vote: 2, seed: 5 })).toEqual({
      correct: 7,
      verify: 7,
    })
    expect(stub.requests).toHaveLength(2)
    expect(userOf(stub.requests[0]!)).toContain('Run the down migration, then verify the data.')
    expect(userOf(stub.requests[0]!)).not.toContain('<think>')
  })

  it('verifier: an off-scale reply is refused and asked again', async () => {
    stub.requests.length = 0
    stub.script({ kind: 'content', text: '{"grades": {"correct": 70, "verify": 7}}' })
    expect(await new LlmVerifier(model(), { retry }).grade({ item, candidate: c1, rubric, vote: 0, seed: 5 })).toEqual({
      correct: 7,
      verify: 7,
    })
    expect(stub.requests).toHaveLength(3)
  })

  it('judge: both orders, the non-JSON one asked again', async () => {
    const good = { ...c3, text: 'A rollback plan: stop writes, run the down migration, verify.' }
    const judge = new LlmPairJudge(model(), { retry })
    expect(await judge.compare({ item, left: c1, right: good })).toBe(-1)
    expect(stub.requests).toHaveLength(3)
    expect(judge.stats()).toMatchObject({
      pairs: 1,
      consistent: 1,
      decisive: 1,
      firstPositionWins: 1,
      secondPositionWins: 1,
    })
  })
})

describe('createSearchRoles', () => {
  it('defaults to MockChatModel on the mock backend, with the protocol and judge it is given', async () => {
    const roles = createSearchRoles({ backend: 'mock', dataset, gradeMax: 5, numVotes: 3 })
    expect(roles.judgeChoice.kind).toBe('heuristic')
    const rubric = await roles.initializer.initialize(item, { seed: 1 })
    expect(rubric.grading_protocol).toEqual({ grade_max: 5, allow_na: true, num_votes: 3 })
    const grades = await roles.verifier.grade({ item, candidate: c1, rubric, vote: 0, seed: 1 })
    expect(Object.values(grades).every((grade) => Number.isInteger(grade) && grade! <= 5)).toBe(true)
  })

  it('routes roles to their own models, else the shared one; a role without a model is an error on llm', async () => {
    const shared = recording(new MockChatModel())
    const verifierModel = recording(new MockChatModel('verifier-model'))
    const roles = createSearchRoles({
      backend: 'llm',
      model: shared,
      modelsByRole: { verifier: verifierModel },
      dataset,
    })
    await exerciseRoles(roles)
    expect(new Set(verifierModel.requests.map((request) => request.task))).toEqual(new Set(['search_verify']))
    expect(shared.requests.some((request) => request.task === 'search_verify')).toBe(false)
    expect(() => createSearchRoles({ backend: 'llm', modelsByRole: { verifier: verifierModel }, dataset })).toThrow(
      /no model for the initializer/,
    )
  })

  it('uses the rank judge when every candidate is ranked, even on the llm backend, with no judge model', () => {
    const ranked = PreferenceDataset.parse({
      prompts: [
        {
          ...item,
          candidates: item.candidates.map((candidate, index) => ({ ...candidate, label: { rank: index + 1 } })),
        },
      ],
    })
    const roles = createSearchRoles({
      backend: 'llm',
      modelsByRole: { initializer: new MockChatModel(), proposer: new MockChatModel(), verifier: new MockChatModel() },
      dataset: ranked,
    })
    expect(roles.judgeChoice.kind).toBe('rank')
  })

  it('starts from presets given in an autosr file shape, and passes the extraction to the verifier', async () => {
    const model = recording(new MockChatModel())
    const roles = createSearchRoles({
      backend: 'mock',
      model,
      dataset,
      presets: { rubrics: { __default__: { criteria: [{ criterion_id: 'c', text: 'Correct.' }] } }, strict: true },
      extraction: { prompt: { kind: 'regex', pattern: 'roll back (.*) safely' }, candidate: { kind: 'identity' } },
    })
    expect(roles.initializer).toBeInstanceOf(PresetInitializer)
    const rubric = await roles.initializer.initialize(item, { seed: 1 })
    expect(rubric).toMatchObject({
      rubric_id: 'p-leak_r0',
      metadata: { origin: 'preset_initializer', preset_prompt_id: '__default__' },
    })
    await roles.verifier.grade({ item, candidate: c2, rubric, vote: 0, seed: 1 })
    const request = model.requests.at(-1)!
    expect(request.task).toBe('search_verify')
    expect(request.messages.at(-1)!.content).toMatch(/<<<DATA-\w+\na failed database migration\nDATA-/)
    expect(request.messages.at(-1)!.content).toContain(c2.text)
  })
})
