/**
 * What a real OpenAI-compatible server (llama-cpp-python 0.3.36, measured against the first `npm run judge:local`; and
 * llama.cpp's own server, which it serves now) does that a cooperative stub does not, reproduced on the loopback stub:
 * its refusal of OpenAI's `json_schema` shape (an HTTP 500)
 * and its own `{type: 'json_object', schema}`, a prompt over its context window, a reply cut at `max_tokens`, and
 * token counts in `usage`.
 */
import fc from 'fast-check'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { judgeRollout } from '../../src/agents/scorer/index.ts'
import {
  createChatModel,
  instrumentChatModel,
  OpenAIChatModel,
  pLimit,
  type LlmCallRecord,
} from '../../src/llm/index.ts'
import { AgentSettings } from '../../src/schemas/run-config.ts'
import { failureOf } from '../support/failure.ts'
import {
  chatCompletion,
  contextLengthExceeded,
  gradeAllRubrics,
  llamaCppContextExceeded,
  llamaCppFormats,
  startLlmStub,
  type LlmStub,
} from '../support/llm-stub.ts'
import { rubric } from '../support/rubrics.ts'

const INPUT = {
  rubrics: [rubric('a1', undefined, { is_anchor: true }), rubric('d1')],
  rollout: { id: 'r1', input: 'What is 2+2?', output: '4' },
  metadata: { high_level_goal: 'math', model_size: '7B', current_step: 0, total_steps: 10 },
  gradeMax: 10,
  locale: 'en' as const,
}
const retry = { maxAttempts: 4, sleep: async () => {} }

let stub: LlmStub
beforeAll(async () => {
  stub = await startLlmStub()
})
afterAll(() => stub.close())
beforeEach(() => {
  stub.requests.length = 0
  stub.intercept(undefined)
  stub.respondWith((body) => JSON.stringify({ grades: { a1: 7, d1: 7 }, model: body.model }))
})

/**
 * A scorer on the stub, as a run's `agents.scorer` would configure it. `endpoint` names another endpoint on the same
 * stub (the stub answers under any path), since the adapter remembers a refusal per endpoint for the process's life.
 */
const scorer = (structured: 'json_object' | 'json_schema' | 'json_object_schema', endpoint = '') =>
  createChatModel(
    AgentSettings.parse({
      backend: 'openai',
      base_url: stub.baseUrl.replace(/\/v1$/, `${endpoint}/v1`),
      structured_output: structured,
    }),
    { secrets: {} },
  )

describe("llama-cpp-python's structured output", () => {
  it("sends the schema in llama-cpp-python's shape with structured_output: json_object_schema", async () => {
    stub.intercept(llamaCppFormats)
    const judgement = await judgeRollout(scorer('json_object_schema'), INPUT, retry)
    expect(judgement.criteria.map((criterion) => criterion.grade)).toEqual([7, 7])
    expect(stub.requests).toHaveLength(1)
    const format = stub.requests[0]!.response_format as { type: string; schema: { required: string[] } }
    expect(format.type).toBe('json_object')
    expect(format.schema.required).toEqual(['grades'])
  })

  it('answers its HTTP 500 refusal of json_schema with the same schema in its shape, once per endpoint', async () => {
    stub.intercept(llamaCppFormats)
    const model = scorer('json_schema', '/refusing')
    await judgeRollout(model, INPUT, retry)
    expect(stub.requests.map((body) => (body.response_format as { type: string }).type)).toEqual([
      'json_schema',
      'json_object',
    ])
    expect(stub.requests[1]!.response_format).toMatchObject({ schema: { required: ['grades'] } })
    // Learnt: the next request, from a new adapter on the same endpoint, goes straight to the shape it takes.
    await judgeRollout(scorer('json_schema', '/refusing'), INPUT, retry)
    expect(stub.requests).toHaveLength(3)
    expect(stub.requests[2]!.response_format).toMatchObject({ type: 'json_object', schema: { type: 'object' } })
  })

  it('still retries an ordinary HTTP 500 as a server failure', async () => {
    stub.script({ kind: 'status', status: 500 })
    await judgeRollout(scorer('json_schema', '/failing'), INPUT, retry)
    expect(stub.requests.map((body) => (body.response_format as { type: string }).type)).toEqual([
      'json_schema',
      'json_schema',
    ])
  })
})

describe('a prompt over the context window', () => {
  it('is a context_length failure naming the limit, after one request: never retried, never a grade', async () => {
    stub.script(contextLengthExceeded(8192, 9031, 192))
    const failure = await failureOf(judgeRollout(scorer('json_object'), INPUT, retry))
    expect(failure).toMatchObject({ kind: 'context_length', retryable: false, details: { contextLimit: 8192 } })
    expect(String(failure.message)).toContain('context window of 8192 tokens')
    expect(stub.requests).toHaveLength(1)
  })

  it("is the same failure in llama.cpp's own server's words (its type and n_ctx), whatever the sizes", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 256, max: 131_072 }),
        fc.integer({ min: 1, max: 50_000 }),
        async (limit, over) => {
          stub.requests.length = 0
          stub.script(llamaCppContextExceeded(limit, limit + over))
          const failure = await failureOf(judgeRollout(scorer('json_schema', '/llama-cpp'), INPUT, retry))
          expect(failure).toMatchObject({ kind: 'context_length', retryable: false, details: { contextLimit: limit } })
          expect(String(failure.message)).toContain(`context window of ${limit} tokens`)
          expect(stub.requests).toHaveLength(1)
        },
      ),
      { numRuns: 25 },
    )
  })
})

describe('a reply cut at max_tokens', () => {
  it('is asked again once with twice the room, and the full reply is the grade', async () => {
    // `"grade": 10` cut to `"grade": 1` would parse; the cut reply must never be read.
    stub.respondWith(() => JSON.stringify({ grades: { a1: 10, d1: 10 } }))
    stub.script({ kind: 'truncated', chars: '{"grades":{"a1":10,"d1":1'.length })
    const judgement = await judgeRollout(scorer('json_object'), INPUT, retry)
    expect(judgement.criteria.map((criterion) => criterion.grade)).toEqual([10, 10])
    const room = stub.requests.map((body) => body.max_tokens as number)
    expect(room).toHaveLength(2)
    expect(room[1]).toBe(room[0]! * 2)
  })

  it('is a failed judgement when cut again with more room, with no third call', async () => {
    stub.script({ kind: 'truncated' }, { kind: 'truncated' })
    const failure = await failureOf(judgeRollout(scorer('json_object'), INPUT, retry))
    expect(failure).toMatchObject({ kind: 'invalid_reply' })
    expect(String(failure.message)).toContain('cut at max_tokens')
    expect(stub.requests).toHaveLength(2)
  })

  it("keeps a role's own max_tokens: the retry has the same room, and a second cut fails", async () => {
    stub.script({ kind: 'truncated' }, { kind: 'truncated' })
    const model = createChatModel(AgentSettings.parse({ backend: 'openai', base_url: stub.baseUrl, max_tokens: 64 }), {
      secrets: {},
    })
    expect(await failureOf(judgeRollout(model, INPUT, retry))).toMatchObject({ kind: 'invalid_reply' })
    expect(stub.requests.map((body) => body.max_tokens)).toEqual([64, 64])
  })
})

describe('token counts', () => {
  it("come from the server's usage, per call", async () => {
    const calls: LlmCallRecord[] = []
    stub.respondWith(gradeAllRubrics(7))
    const model = instrumentChatModel(
      new OpenAIChatModel({ baseURL: stub.baseUrl, apiKey: 'x', model: 'm', temperature: 0, timeoutMs: 5_000 }),
      { role: 'scorer', log: calls, roleLimit: pLimit(1), totalLimit: pLimit(1) },
    )
    await model.complete({ role: 'scorer', task: 'score', messages: [{ role: 'user', content: 'hi' }], json: true })
    const usage = chatCompletion({ model: 'm', messages: [] }, '', 0).usage
    expect(calls).toMatchObject([
      { prompt_tokens: usage.prompt_tokens, completion_tokens: usage.completion_tokens, outcome: 'ok' },
    ])
  })

  it('count a cut reply’s tokens too: the server spent them', async () => {
    const calls: LlmCallRecord[] = []
    stub.script({ kind: 'truncated' })
    const model = instrumentChatModel(
      new OpenAIChatModel({ baseURL: stub.baseUrl, apiKey: 'x', model: 'm', temperature: 0, timeoutMs: 5_000 }),
      { role: 'scorer', log: calls, roleLimit: pLimit(1), totalLimit: pLimit(1) },
    )
    const cut = model.complete({
      role: 'scorer',
      task: 'score',
      messages: [{ role: 'user', content: 'hi' }],
      json: true,
    })
    expect(await failureOf(cut)).toMatchObject({ kind: 'invalid_reply' })
    const usage = chatCompletion({ model: 'm', messages: [] }, '', 0).usage
    expect(usage.prompt_tokens).toBeGreaterThan(0)
    expect(calls).toMatchObject([
      { prompt_tokens: usage.prompt_tokens, completion_tokens: usage.completion_tokens, outcome: 'invalid_reply' },
    ])
  })
})
