import fc from 'fast-check'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { buildScorerRequest, gradesReplyTokens, judgeRollout } from '../../src/agents/scorer/index.ts'
import {
  createChatModel,
  instrumentChatModel,
  type ChatModel,
  LlmError,
  OpenAIChatModel,
  pLimit,
  withRetry,
  type LlmCallRecord,
} from '../../src/llm/index.ts'
import { parseRetryAfter } from '../../src/llm/retry.ts'
import { retry } from '../../src/llm/retry.ts'
import { AgentSettings } from '../../src/schemas/run-config.ts'
import type { Rubric } from '../../src/schemas/rubric.ts'
import { gradeAllRubrics, startLlmStub, type LlmStub } from '../support/llm-stub.ts'
import { failureOf } from '../support/failure.ts'

const RUBRICS: Rubric[] = [
  {
    id: 'a1',
    text: 'Correct.',
    weight: 2,
    is_anchor: true,
    version: 1,
    created_at: '2026-01-01T00:00:00.000Z',
    metadata: {},
  },
  {
    id: 'd1',
    text: 'Concise.',
    weight: 1,
    is_anchor: false,
    version: 1,
    created_at: '2026-01-01T00:00:00.000Z',
    metadata: {},
  },
]
const rubricNo = (i: number): Rubric => ({ ...RUBRICS[1]!, id: `criterion-${i}` })
const INPUT = {
  rubrics: RUBRICS,
  rollout: { id: 'r1', input: 'What is 2+2?', output: '4' },
  metadata: { high_level_goal: 'math', model_size: '7B', current_step: 0, total_steps: 10 },
  gradeMax: 10,
  locale: 'en' as const,
}
const noSleep = async () => {}

let stub: LlmStub
beforeAll(async () => {
  stub = await startLlmStub()
})
afterAll(() => stub.close())
beforeEach(() => {
  stub.requests.length = 0
  stub.respondWith(gradeAllRubrics(7))
})

const model = (overrides: Partial<{ timeoutMs: number; seed: number }> = {}) =>
  new OpenAIChatModel({
    baseURL: stub.baseUrl,
    apiKey: 'k',
    model: 'stub-model',
    temperature: 0,
    maxTokens: 256,
    timeoutMs: 2_000,
    ...overrides,
  })

describe('OpenAIChatModel against an OpenAI-compatible stub', () => {
  it('sends the model, temperature, seed and a JSON response format, and reads content and usage', async () => {
    const request = await buildScorerRequest(INPUT)
    const reply = await model({ seed: 42 }).complete(request)
    expect(JSON.parse(reply.text).grades).toHaveLength(2)
    expect(reply.usage).toEqual({ prompt_tokens: 100, completion_tokens: 20 })
    expect(stub.requests[0]).toMatchObject({
      model: 'stub-model',
      temperature: 0,
      seed: 42,
      max_tokens: 256,
      response_format: { type: 'json_object' },
    })
  })

  it("asks for the tokens a judge reply needs when the role sets no max_tokens; a role's max_tokens wins", async () => {
    const unset = createChatModel(AgentSettings.parse({ backend: 'openai', base_url: stub.baseUrl }), { secrets: {} })
    const few = await buildScorerRequest(INPUT)
    const many = await buildScorerRequest({ ...INPUT, rubrics: Array.from({ length: 20 }, (_, i) => rubricNo(i)) })
    const reasoned = await buildScorerRequest({ ...INPUT, reasons: 'short' })
    for (const request of [few, many, reasoned]) await unset.complete(request)
    const sent = stub.requests.map((body) => body.max_tokens as number)
    expect(sent).toEqual([few.maxTokens, many.maxTokens, reasoned.maxTokens])
    expect(sent[0]).toBeLessThan(1024 / 4)
    expect(sent[1]).toBeGreaterThan(sent[0]!)
    expect(sent[2]).toBeGreaterThan(sent[0]!)
    await model().complete(many)
    expect(stub.requests.at(-1)!.max_tokens).toBe(256)
  })

  it('classifies 429 with its Retry-After, 500, a hang and a broken body', async () => {
    const request = await buildScorerRequest(INPUT)
    stub.script({ kind: 'status', status: 429, retryAfterSeconds: 3 })
    expect(await failureOf(model().complete(request))).toMatchObject({ kind: 'rate_limited', retryAfterSeconds: 3 })
    stub.script({ kind: 'status', status: 500 })
    expect(await failureOf(model().complete(request))).toMatchObject({ kind: 'server_error' })
    stub.script({ kind: 'hang' })
    expect(await failureOf(model({ timeoutMs: 200 }).complete(request))).toMatchObject({ kind: 'timeout' })
    stub.script({ kind: 'broken-body' })
    const broken = await failureOf(model().complete(request))
    expect(['invalid_reply', 'network']).toContain(broken.kind)
    stub.script({ kind: 'status', status: 400 })
    const refused = await failureOf(model().complete(request))
    expect(refused.kind).toBe('bad_request')
    expect(refused.retryable).toBe(false)
  })

  it('makes exactly one HTTP request per call (SDK retries are off)', async () => {
    stub.script({ kind: 'status', status: 503 })
    await failureOf(model().complete(await buildScorerRequest(INPUT)))
    expect(stub.requests).toHaveLength(1)
  })
})

describe('judgeRollout with retries', () => {
  it('retries a non-JSON reply and a 500, then succeeds', async () => {
    stub.script({ kind: 'content', text: 'Sure! The answer looks right.' }, { kind: 'status', status: 500 })
    const judgement = await judgeRollout(model(), INPUT, { maxAttempts: 4, sleep: noSleep })
    expect(judgement.score).toBeCloseTo(0.7)
    expect(stub.requests).toHaveLength(3)
  })

  it('repairs a truncated-but-repairable reply without another call', async () => {
    stub.script({ kind: 'content', text: '{"grades":[{"rubric_id":"a1","grade":10},{"rubric_id":"d1","grade":4}' })
    const judgement = await judgeRollout(model(), INPUT, { maxAttempts: 4, sleep: noSleep })
    expect(judgement.criteria.map((c) => c.grade)).toEqual([10, 4])
    expect(stub.requests).toHaveLength(1)
  })

  it('gives up after maxAttempts with the last failure, never a score', async () => {
    stub.script(...Array.from({ length: 3 }, () => ({ kind: 'status' as const, status: 500 })))
    const failure = await failureOf(judgeRollout(model(), INPUT, { maxAttempts: 3, sleep: noSleep }))
    expect(failure).toBeInstanceOf(LlmError)
    expect(failure.kind).toBe('server_error')
    expect(stub.requests).toHaveLength(3)
  })

  it('waits what Retry-After asks (capped), and counts every attempt in the call log', async () => {
    stub.script(
      { kind: 'status', status: 429, retryAfterSeconds: 2 },
      { kind: 'status', status: 429, retryAfterSeconds: 120 },
    )
    const waits: number[] = []
    const log: LlmCallRecord[] = []
    const counted = instrumentChatModel(model(), { role: 'scorer', log, roleLimit: pLimit(2), totalLimit: pLimit(6) })
    await judgeRollout(counted, INPUT, { maxAttempts: 4, maxDelayMs: 30_000, sleep: async (ms) => void waits.push(ms) })
    expect(waits).toEqual([2_000, 30_000])
    expect(log.map((call) => call.outcome)).toEqual(['rate_limited', 'rate_limited', 'ok'])
    expect(log[2]).toMatchObject({ role: 'scorer', prompt_tokens: 100, completion_tokens: 20 })
  })
})

describe('the call log of an agent call', () => {
  /** What the server answers to one attempt; `text` kinds come back with HTTP 200. */
  const REPLIES = {
    usable: { text: JSON.stringify({ grades: { a1: 7, d1: 4 } }), outcome: 'ok' },
    'not JSON': { text: 'Sure! The answer looks right.', outcome: 'invalid_reply' },
    'a rubric left out': { text: JSON.stringify({ grades: { a1: 7 } }), outcome: 'invalid_reply' },
    'a grade out of range': { text: JSON.stringify({ grades: { a1: 70, d1: 4 } }), outcome: 'invalid_reply' },
    'server error': { text: undefined, outcome: 'server_error' },
  } as const
  type Reply = keyof typeof REPLIES

  const scripted = (replies: readonly Reply[]): ChatModel => {
    let next = 0
    return {
      id: 'scripted',
      complete: async () => {
        const { text } = REPLIES[replies[next++]!]
        if (text === undefined) throw new LlmError('server_error', 'HTTP 500')
        return { text, model: 'scripted', usage: { prompt_tokens: 10, completion_tokens: 5 } }
      },
    }
  }

  it('counts each attempt as what became of its reply: a reply the scorer refused is a failed call', async () => {
    const replies = fc.array(fc.constantFrom(...(Object.keys(REPLIES) as Reply[])), { minLength: 1, maxLength: 5 })
    await fc.assert(
      fc.asyncProperty(replies, async (script) => {
        const log: LlmCallRecord[] = []
        const counted = instrumentChatModel(scripted(script), {
          role: 'scorer',
          log,
          roleLimit: pLimit(2),
          totalLimit: pLimit(6),
        })
        const judged = await judgeRollout(counted, INPUT, { maxAttempts: script.length, sleep: noSleep }).then(
          () => true,
          () => false,
        )
        const used = script.includes('usable') ? script.indexOf('usable') + 1 : script.length
        expect(judged).toBe(script.includes('usable'))
        expect(log.map((call) => call.outcome)).toEqual(script.slice(0, used).map((reply) => REPLIES[reply].outcome))
      }),
    )
  })
})

describe('withRetry and parseRetryAfter', () => {
  it('does not retry a request the server refused', async () => {
    let attempts = 0
    await expect(
      withRetry(
        async () => {
          attempts++
          throw new LlmError('bad_request', 'no')
        },
        { maxAttempts: 5, sleep: noSleep },
      ),
    ).rejects.toThrow('no')
    expect(attempts).toBe(1)
  })

  it('reads delta seconds and HTTP dates', () => {
    expect(parseRetryAfter('7')).toBe(7)
    expect(parseRetryAfter(new Date(10_000).toUTCString(), 4_000)).toBe(6)
    expect(parseRetryAfter('soon')).toBeUndefined()
    expect(parseRetryAfter(null)).toBeUndefined()
  })

  it('waits what the server asks up to maxDelayMs, and ends with the last failure exactly as thrown', async () => {
    const waits: number[] = []
    let attempts = 0
    const failure = await retry(
      async () => {
        attempts++
        throw 'busy'
      },
      (error) => ({ error, retryable: true, retryAfterSeconds: 60 }),
      { maxAttempts: 3, maxDelayMs: 5_000, sleep: async (ms) => void waits.push(ms) },
    ).catch((caught: unknown) => caught)
    expect(failure).toBe('busy')
    expect(attempts).toBe(3)
    expect(waits).toEqual([5_000, 5_000])
  })

  it('stops waiting between attempts when its signal aborts', async () => {
    const controller = new AbortController()
    let attempts = 0
    const pending = retry(
      async () => {
        attempts++
        controller.abort(new Error('stop'))
        throw new Error('down')
      },
      (error) => ({ error, retryable: true, delayMs: 60_000 }),
      { signal: controller.signal },
    )
    await expect(pending).rejects.toThrow('stop')
    expect(attempts).toBe(1)
  })
})

describe('instrumentChatModel concurrency caps', () => {
  it('never has more calls in flight than the role cap', async () => {
    let inFlight = 0
    let peak = 0
    const slow = {
      id: 'slow',
      complete: async () => {
        peak = Math.max(peak, ++inFlight)
        // Injected latency: each call stays in flight across a timer tick, so the peak shows the role cap.
        await new Promise((resolve) => setTimeout(resolve, 5))
        inFlight--
        return { text: '{}', model: 'slow', usage: { prompt_tokens: 0, completion_tokens: 0 } }
      },
    }
    const capped = instrumentChatModel(slow, { role: 'scorer', log: [], roleLimit: pLimit(2), totalLimit: pLimit(6) })
    const request = await buildScorerRequest(INPUT)
    await Promise.all(Array.from({ length: 8 }, () => capped.complete(request)))
    expect(peak).toBe(2)
  })
})

describe('createChatModel', () => {
  it('picks the mock without a base URL and openai with one', () => {
    expect(createChatModel(AgentSettings.parse({}), { secrets: {} }).id).toBe('mock:mock-heuristic-1')
    expect(
      createChatModel(AgentSettings.parse({ base_url: 'http://127.0.0.1:1/v1', model: 'q' }), { secrets: {} }).id,
    ).toBe('openai:http://127.0.0.1:1/v1#q')
  })

  it('refuses a named secret that is not set, and the workers-ai backend without its binding', () => {
    expect(() =>
      createChatModel(AgentSettings.parse({ backend: 'openai', base_url: 'http://x.test/v1', api_key_env: 'MY_KEY' }), {
        secrets: {},
      }),
    ).toThrow(/MY_KEY/)
    expect(() => createChatModel(AgentSettings.parse({ backend: 'workers-ai' }), { secrets: {} })).toThrow(/AI binding/)
  })

  it('sends the workers-ai request through the binding', async () => {
    const seen: unknown[] = []
    const ai = {
      run: async (modelName: string, input: Record<string, unknown>) => {
        seen.push([modelName, input])
        return { response: '{"grades":[]}' }
      },
    }
    const workersAi = createChatModel(
      AgentSettings.parse({ backend: 'workers-ai', model: '@cf/meta/llama-3.1-8b-instruct' }),
      { secrets: {}, ai },
    )
    const reply = await workersAi.complete(await buildScorerRequest(INPUT))
    expect(reply.text).toBe('{"grades":[]}')
    expect(seen[0]).toEqual([
      '@cf/meta/llama-3.1-8b-instruct',
      expect.objectContaining({ temperature: 0, max_tokens: gradesReplyTokens(INPUT.rubrics.length, 'none') }),
    ])
  })
})
