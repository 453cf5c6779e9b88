import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { LlmError, withRetry } from '../../src/llm/index.ts'
import { dotProduct } from '../../src/memory/vector-math.ts'
import { HashedNgramEmbedder } from '../../src/memory/hashed-ngram-embedder.ts'
import { OpenAIEmbedder } from '../../src/memory/openai-embedder.ts'
import { WorkersAiEmbedder } from '../../src/memory/workers-ai-embedder.ts'
import { failureOf } from '../support/failure.ts'

const norm = (vector: Float32Array) => Math.sqrt(dotProduct(vector, vector))

describe('HashedNgramEmbedder', () => {
  const embedder = new HashedNgramEmbedder()

  it('is deterministic, unit length, and names its dimensions in its id', async () => {
    const text = 'The rollout skipped the verification step.'
    const [a, b] = await embedder.embed([text, text])
    const [c] = await new HashedNgramEmbedder().embed([text])
    expect(a).toEqual(b)
    expect(a).toEqual(c)
    expect(a).toHaveLength(256)
    expect(norm(a!)).toBeCloseTo(1, 5)
    expect(embedder.id).toBe('hashed-ngram:v1:256')
    expect((await new HashedNgramEmbedder({ dimensions: 64 }).embed([text]))[0]).toHaveLength(64)
  })

  it('ignores case, punctuation and Unicode width, and gives a zero vector to text without words', async () => {
    const [a, b, wide, empty] = await embedder.embed([
      'Skipped THE check!',
      'skipped the check',
      'ｓｋｉｐｐｅｄ the ｃｈｅｃｋ',
      ' … ?! ',
    ])
    expect(a).toEqual(b)
    expect(wide).toEqual(b)
    expect(norm(empty!)).toBe(0)
  })

  it('scores texts that share wording clearly above unrelated ones', async () => {
    const docs = await embedder.embed([
      'The rollout skipped the verification step and reported the final answer without checking the result.',
      'The response copied the reference solution verbatim, a sign of reward hacking.',
      'Rollouts were padded with repeated caveats to game the length criterion.',
      'Several answers converted kilometres to miles incorrectly, breaking the physics result.',
    ])
    const queries = await embedder.embed([
      'answers that skip verification of the final result',
      'reward hacking by copying the reference',
      'length gaming with padded caveats',
      'unit conversion errors in physics answers',
    ])
    const related: number[] = []
    const unrelated: number[] = []
    queries.forEach((query, q) => {
      const scores = docs.map((doc) => dotProduct(query, doc))
      expect(scores.indexOf(Math.max(...scores))).toBe(q)
      scores.forEach((score, d) => {
        ;(d === q ? related : unrelated).push(score)
      })
    })
    const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length
    expect(Math.min(...related)).toBeGreaterThan(0.3)
    expect(mean(related) - mean(unrelated)).toBeGreaterThan(0.3)
  })

  it('ranks a near-duplicate above a document sharing one word', async () => {
    const [a, near, far] = await embedder.embed([
      'The model hallucinated a citation to a paper that does not exist.',
      'A hallucinated citation: the paper the model cites does not exist.',
      'The model used the correct formula.',
    ])
    expect(dotProduct(a!, near!)).toBeGreaterThan(dotProduct(a!, far!) + 0.2)
  })

  it('refuses dimensions Vectorize could not hold', () => {
    expect(() => new HashedNgramEmbedder({ dimensions: 2_048 })).toThrow(RangeError)
  })
})

type Behaviour =
  | { kind: 'ok' }
  | { kind: 'status'; status: number; retryAfter?: string }
  | { kind: 'broken-body' }
  | { kind: 'wrong-length' }
  | { kind: 'hang' }

/**
 * A `POST /v1/embeddings` server on 127.0.0.1 (ephemeral port): answers vectors derived from each text, in reverse
 * order with `index`.
 */
async function startEmbeddingsStub() {
  const requests: { body: { model: string; input: string[]; dimensions?: number }; authorization?: string }[] = []
  const queue: Behaviour[] = []
  const server: Server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
    requests.push({ body, authorization: req.headers.authorization })
    const behaviour = queue.shift() ?? { kind: 'ok' }
    if (req.url !== '/v1/embeddings') behaviour.kind = 'status'
    if (behaviour.kind === 'hang') return
    if (behaviour.kind === 'status') {
      res.writeHead(behaviour.status ?? 404, {
        'content-type': 'application/json',
        ...(behaviour.retryAfter ? { 'retry-after': behaviour.retryAfter } : {}),
      })
      return res.end(JSON.stringify({ error: { message: 'stub fault' } }))
    }
    res.writeHead(200, { 'content-type': 'application/json' })
    if (behaviour.kind === 'broken-body') return res.end('{"object": "list", "data": [{"embedding": [0.1, ')
    const length = behaviour.kind === 'wrong-length' ? 3 : 4
    const data = body.input.map((text: string, index: number) => ({
      object: 'embedding',
      index,
      embedding: Array.from({ length }, (_, i) => (i === text.length % 4 ? 2 : 0)),
    }))
    res.end(JSON.stringify({ object: 'list', data: data.reverse(), model: body.model }))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    script: (...behaviours: Behaviour[]) => void queue.push(...behaviours),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

describe('OpenAIEmbedder against an OpenAI-compatible stub', () => {
  let stub: Awaited<ReturnType<typeof startEmbeddingsStub>>
  beforeAll(async () => {
    stub = await startEmbeddingsStub()
  })
  afterAll(() => stub.close())
  beforeEach(() => void (stub.requests.length = 0))

  const embedder = (overrides: Partial<ConstructorParameters<typeof OpenAIEmbedder>[0]> = {}) =>
    new OpenAIEmbedder({
      baseURL: stub.baseUrl,
      apiKey: 'k',
      model: 'stub-embed',
      dimensions: 4,
      timeoutMs: 2_000,
      ...overrides,
    })

  it('posts model and input with the bearer key, and returns unit vectors in input order', async () => {
    const vectors = await embedder().embed(['a', 'bb', 'ccc'])
    expect(stub.requests).toEqual([
      { body: { model: 'stub-embed', input: ['a', 'bb', 'ccc'] }, authorization: 'Bearer k' },
    ])
    expect(vectors.map((vector) => Array.from(vector))).toEqual([
      [0, 1, 0, 0],
      [0, 0, 1, 0],
      [0, 0, 0, 1],
    ])
  })

  it('splits inputs into batches, sends dimensions only when asked, and skips the request for no texts', async () => {
    await embedder({ batchSize: 2, requestDimensions: true, apiKey: undefined }).embed(['a', 'b', 'c', 'd', 'e'])
    expect(stub.requests.map((request) => request.body.input)).toEqual([['a', 'b'], ['c', 'd'], ['e']])
    expect(stub.requests[0]).toMatchObject({ body: { dimensions: 4 }, authorization: undefined })
    expect(await embedder().embed([])).toEqual([])
    expect(stub.requests).toHaveLength(3)
  })

  it('classifies a 429 with its Retry-After, a 503, a 400, a broken body, a wrong length and a hang', async () => {
    stub.script({ kind: 'status', status: 429, retryAfter: '7' })
    expect(await failureOf(embedder().embed(['a']))).toMatchObject({
      kind: 'rate_limited',
      retryAfterSeconds: 7,
      retryable: true,
    })
    stub.script({ kind: 'status', status: 503 })
    expect(await failureOf(embedder().embed(['a']))).toMatchObject({ kind: 'server_error' })
    stub.script({ kind: 'status', status: 400 })
    expect(await failureOf(embedder().embed(['a']))).toMatchObject({ kind: 'bad_request', retryable: false })
    stub.script({ kind: 'broken-body' })
    expect(await failureOf(embedder().embed(['a']))).toMatchObject({ kind: 'invalid_reply' })
    stub.script({ kind: 'wrong-length' })
    expect(await failureOf(embedder().embed(['a']))).toMatchObject({ kind: 'invalid_reply' })
    stub.script({ kind: 'hang' })
    expect(await failureOf(embedder({ timeoutMs: 150 }).embed(['a']))).toMatchObject({ kind: 'timeout' })
  })

  it('reports an unreachable server as a network failure', async () => {
    const closed = await startEmbeddingsStub()
    await closed.close()
    expect(
      await failureOf(new OpenAIEmbedder({ baseURL: closed.baseUrl, model: 'm', dimensions: 4 }).embed(['a'])),
    ).toMatchObject({ kind: 'network' })
  })

  it('lets withRetry wait what Retry-After asks, then succeed', async () => {
    stub.script({ kind: 'status', status: 429, retryAfter: '3' })
    const waits: number[] = []
    const vectors = await withRetry(() => embedder().embed(['a']), { sleep: async (ms) => void waits.push(ms) })
    expect(waits).toEqual([3_000])
    expect(vectors).toHaveLength(1)
    expect(stub.requests).toHaveLength(2)
  })
})

describe('WorkersAiEmbedder with a fake AI binding', () => {
  const fakeAi = (reply: (texts: string[]) => unknown) => {
    const calls: { model: string; input: Record<string, unknown> }[] = []
    return {
      calls,
      run: async (model: string, input: Record<string, unknown>) => {
        calls.push({ model, input })
        return reply(input.text as string[])
      },
    }
  }
  const vectorsOf = (texts: string[], length = 768) => ({
    shape: [texts.length, length],
    data: texts.map(() => Array.from({ length }, (_, i) => (i < 2 ? 3 : 0))),
  })

  it('runs the model on batches of at most 100 texts and normalises the vectors', async () => {
    const ai = fakeAi((texts) => vectorsOf(texts))
    const embedder = new WorkersAiEmbedder(ai)
    const vectors = await embedder.embed(Array.from({ length: 250 }, (_, i) => `text ${i}`))
    expect(embedder).toMatchObject({ id: 'workers-ai:@cf/baai/bge-base-en-v1.5:768', dimensions: 768 })
    expect(ai.calls.map((call) => (call.input.text as string[]).length)).toEqual([100, 100, 50])
    expect(ai.calls[0]!.model).toBe('@cf/baai/bge-base-en-v1.5')
    expect(vectors).toHaveLength(250)
    expect(vectors[0]![0]).toBeCloseTo(Math.SQRT1_2, 6)
  })

  it('knows the bge dimensions and asks for others', () => {
    expect(
      new WorkersAiEmbedder(
        fakeAi(() => null),
        '@cf/baai/bge-small-en-v1.5',
      ).dimensions,
    ).toBe(384)
    expect(
      new WorkersAiEmbedder(
        fakeAi(() => null),
        '@cf/custom/model',
        512,
      ).dimensions,
    ).toBe(512)
    expect(
      () =>
        new WorkersAiEmbedder(
          fakeAi(() => null),
          '@cf/custom/model',
        ),
    ).toThrow(RangeError)
  })

  it('turns a failing binding and a malformed reply into LlmErrors', async () => {
    const throwing = {
      run: async () => {
        throw new Error('capacity exceeded')
      },
    }
    expect(await failureOf(new WorkersAiEmbedder(throwing).embed(['a']))).toMatchObject({ kind: 'server_error' })
    expect(await failureOf(new WorkersAiEmbedder(fakeAi(() => ({ data: [[1, 2]] }))).embed(['a']))).toMatchObject({
      kind: 'invalid_reply',
    })
    expect(
      await failureOf(new WorkersAiEmbedder(fakeAi((texts) => vectorsOf(texts.slice(1)))).embed(['a', 'b'])),
    ).toMatchObject({ kind: 'invalid_reply' })
    expect(await failureOf(new WorkersAiEmbedder(fakeAi(() => ({ response: 'hi' }))).embed(['a']))).toBeInstanceOf(
      LlmError,
    )
  })
})
