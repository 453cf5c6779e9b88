/**
 * Structured output on the judge paths: the online scorer, the group scorer and the /rm (search) verifier send the
 * exact JSON schema of their reply — the rubric ids, nothing else, integers on 0..grade_max — to a server that enforces
 * one (`structured_output: json_schema`). The schema itself refuses a wrong id, a missing criterion and a grade off the
 * scale; a stub that decodes under the schema, as vLLM's guided decoding does, never needs a repair call, while the
 * same sloppy model behind `json_object` costs one.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { buildGroupScorerRequest, judgeGroup } from '../../src/agents/group-scorer/index.ts'
import { buildScorerRequest, judgeRollout } from '../../src/agents/scorer/index.ts'
import { createChatModel } from '../../src/llm/index.ts'
import type { ChatModel, ChatRequest } from '../../src/llm/types.ts'
import { AgentSettings } from '../../src/schemas/run-config.ts'
import { buildVerifierRequest, LlmVerifier } from '../../src/search/roles/index.ts'
import { Candidate, PromptItem } from '../../src/search/types.ts'
import { SearchRubric } from '../../src/schemas/search-rubric.ts'
import { verifierModel } from '../../workers/artifacts/llm.ts'
import type { Env } from '../../workers/env.ts'
import { startLlmStub, type ChatCompletionBody, type LlmStub } from '../support/llm-stub.ts'
import { failureOf } from '../support/failure.ts'
import { rubric } from '../support/rubrics.ts'

const RUBRICS = [rubric('a1', undefined, { is_anchor: true }), rubric('d1', undefined, { is_anchor: true })]
const METADATA = { high_level_goal: 'math', model_size: '7B', current_step: 0, total_steps: 10 }
const ROLLOUTS = ['4', 'five'].map((output, i) => ({ id: `r${i}`, input: 'What is 2+2?', output }))
const SCORER_INPUT = {
  rubrics: RUBRICS,
  rollout: ROLLOUTS[0]!,
  metadata: METADATA,
  gradeMax: 10,
  locale: 'en' as const,
}
const GROUP_INPUT = { ...SCORER_INPUT, rollouts: ROLLOUTS, seed: 3 }
const SEARCH_RUBRIC = SearchRubric.parse({
  rubric_id: 'r1',
  criteria: [
    { criterion_id: 'a1', text: 'A', weight: 1 },
    { criterion_id: 'd1', text: 'B', weight: 1 },
  ],
  grading_protocol: { grade_max: 10, allow_na: false, num_votes: 1 },
})
const ITEM = PromptItem.parse({
  prompt_id: 'p',
  prompt: 'What is 2+2?',
  candidates: [
    { candidate_id: 'c1', text: '4' },
    { candidate_id: 'c2', text: 'five' },
  ],
})
const GRADE_INPUT = {
  item: ITEM,
  candidate: Candidate.parse({ candidate_id: 'c1', text: '4' }),
  rubric: SEARCH_RUBRIC,
  vote: 0,
  seed: 1,
}

const schemaOf = (request: ChatRequest) => z.fromJSONSchema(request.jsonSchema!.schema as never)

/** Each path's request, a reply its schema must accept, and a way to put grades (by id) into that reply's shape. */
const PATHS = {
  'online scorer': {
    request: () => buildScorerRequest(SCORER_INPUT),
    reply: (grades: Record<string, unknown>) => ({ grades }),
  },
  'group scorer': {
    request: async () => (await buildGroupScorerRequest(GROUP_INPUT)).request,
    reply: (grades: Record<string, unknown>) => ({ A1: grades, A2: { a1: 3, d1: 4 } }),
  },
  '/rm and search verifier': {
    request: () => buildVerifierRequest(GRADE_INPUT, { locale: 'en' }),
    reply: (grades: Record<string, unknown>) => ({ grades }),
  },
}

describe.each(Object.entries(PATHS))('the JSON schema a %s sends', (_name, path) => {
  it('accepts exactly the rubric ids with integer grades on the scale', async () => {
    const schema = schemaOf(await path.request())
    expect(schema.safeParse(path.reply({ a1: 7, d1: 0 })).success).toBe(true)
    expect(schema.safeParse(path.reply({ a1: 7, d1: 10 })).success).toBe(true)
  })

  it('rejects a wrong id, a missing criterion and a grade off the scale', async () => {
    const schema = schemaOf(await path.request())
    expect(schema.safeParse(path.reply({ a1: 7, x9: 3 })).success, 'wrong id').toBe(false)
    expect(schema.safeParse(path.reply({ a1: 7, d1: 3, x9: 3 })).success, 'an extra id').toBe(false)
    expect(schema.safeParse(path.reply({ a1: 7 })).success, 'missing criterion').toBe(false)
    expect(schema.safeParse(path.reply({ a1: 11, d1: 3 })).success, 'above the scale').toBe(false)
    expect(schema.safeParse(path.reply({ a1: -1, d1: 3 })).success, 'below the scale').toBe(false)
    expect(schema.safeParse(path.reply({ a1: 6.5, d1: 3 })).success, 'not an integer').toBe(false)
  })
})

// ------------------------------------------------------------------------------------------------
// Against a stub that decodes under the schema

type Schema = {
  type?: string
  properties?: Record<string, Schema>
  anyOf?: Schema[]
  minimum?: number
  maximum?: number
  enum?: unknown[]
  maxLength?: number
}

/** What a server that decodes under `schema` writes when the model leans towards `wanted`. */
function guided(schema: Schema, wanted: unknown): unknown {
  if (schema.anyOf) return guided(schema.anyOf[0]!, wanted)
  // An enum (a grade scale): the allowed value nearest to what the model leans to.
  if (schema.enum) {
    const number = typeof wanted === 'number' ? wanted : 0
    const values = schema.enum as number[]
    return values.reduce((best, value) => (Math.abs(value - number) < Math.abs(best - number) ? value : best))
  }
  switch (schema.type) {
    case 'object': {
      const record = (typeof wanted === 'object' && wanted !== null ? wanted : {}) as Record<string, unknown>
      return Object.fromEntries(Object.entries(schema.properties ?? {}).map(([k, s]) => [k, guided(s, record[k])]))
    }
    case 'integer': {
      const number = typeof wanted === 'number' ? Math.round(wanted) : 0
      return Math.min(schema.maximum ?? number, Math.max(schema.minimum ?? number, number))
    }
    case 'string':
      return typeof wanted === 'string' ? wanted.slice(0, schema.maxLength) : ''
    default:
      return null
  }
}

/** A model that always leans to a grade off the scale, an id that is not a rubric's, and one criterion left out. */
const SLOPPY = { a1: 11, x9: 3 }
function sloppyModel(body: ChatCompletionBody): string {
  const format = body.response_format as { type: string; json_schema?: { schema: Schema } } | undefined
  const user = body.messages.at(-1)!.content
  const labels = [...user.matchAll(/^Answer (A\d+):/gm)].map((match) => match[1]!)
  const wanted = labels.length ? Object.fromEntries(labels.map((label) => [label, SLOPPY])) : { grades: SLOPPY }
  if (format?.type !== 'json_schema') return JSON.stringify(wanted)
  const decoded = guided(format.json_schema!.schema, wanted)
  expect(z.fromJSONSchema(format.json_schema!.schema as never).safeParse(decoded).success).toBe(true)
  return JSON.stringify(decoded)
}

let stub: LlmStub
beforeAll(async () => {
  stub = await startLlmStub()
})
afterAll(() => stub.close())
beforeEach(() => {
  stub.requests.length = 0
  stub.respondWith(sloppyModel)
})

const modelWith = (structured: 'json_object' | 'json_schema') =>
  createChatModel(AgentSettings.parse({ backend: 'openai', base_url: stub.baseUrl, structured_output: structured }), {
    secrets: {},
  })
const retry = { maxAttempts: 2, sleep: async () => {} }
const CALLS = {
  'online scorer': (model: ChatModel) => judgeRollout(model, SCORER_INPUT, retry),
  'group scorer': (model: ChatModel) => judgeGroup(model, GROUP_INPUT, retry),
  '/rm and search verifier': (model: ChatModel) => new LlmVerifier(model, { retry }).grade(GRADE_INPUT),
}

describe.each(Object.entries(CALLS))('%s against a schema-enforcing server', (_name, judge) => {
  it('gets a reply that parses on the first call: no repair call', async () => {
    await judge(modelWith('json_schema'))
    expect(stub.requests).toHaveLength(1)
    expect(stub.requests[0]!.response_format).toMatchObject({ type: 'json_schema', json_schema: { strict: true } })
  })

  it('keeps json_object where the server has no structured output, and pays a repair call there', async () => {
    expect(await failureOf(judge(modelWith('json_object')))).toMatchObject({ kind: 'invalid_reply' })
    expect(stub.requests).toHaveLength(2)
    expect(stub.requests[0]!.response_format).toEqual({ type: 'json_object' })
  })
})

describe('/rm deployment', () => {
  it("sends the verifier's schema when the deployment's llm says structured_output: json_schema", async () => {
    const artifact = {
      runtime: { backend: 'openai', verifier_model: 'judge', temperature: 0, max_tokens: 256, seed: 1 },
    }
    const model = verifierModel({ DEPLOYMENT: 'local' } as Env, artifact as never, {
      base_url: stub.baseUrl,
      model: 'judge',
      structured_output: 'json_schema',
    })
    const grades = await new LlmVerifier(model, { retry }).grade(GRADE_INPUT)
    expect(grades).toEqual({ a1: 10, d1: 0 })
    expect(stub.requests).toHaveLength(1)
    expect(stub.requests[0]!.response_format).toMatchObject({ json_schema: { name: 'verifier_grades' } })
  })
})
