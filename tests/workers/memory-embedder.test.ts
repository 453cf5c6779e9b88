/**
 * `EMBEDDER=openai`: the Worker's memory embeds through an OpenAI-compatible `/embeddings` (here a fake endpoint that
 * answers with vectors of its own and records what it was sent), retried on a 429 as its Retry-After asks; a missing
 * setting is an error that names it.
 */
import { env } from 'cloudflare:workers'
import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { pLimit } from '../../src/llm/index.ts'
import type { MemoryDocument } from '../../src/schemas/memory.ts'
import { createApp } from '../../workers/app.ts'
import { embedderFor, memoryFor } from '../../workers/memory/backends.ts'
import { answerOf, clearFakeEndpoints, createRun, fakeEndpoint, requestOf } from './helpers.ts'

const API_KEY = 'sk-embeddings-secret-123'
const app = createApp()

/** The deployment's vars for the fake endpoint `tag`, 4-dimensional vectors. */
const openaiEnv = (tag: string, overrides: Record<string, string | undefined> = {}) =>
  ({
    ...env,
    EMBEDDER: 'openai',
    EMBEDDINGS_BASE_URL: `http://llm.test/${tag}/v1`,
    EMBEDDINGS_MODEL: 'text-embed-fake',
    EMBEDDINGS_DIMENSIONS: '4',
    EMBEDDINGS_API_KEY: API_KEY,
    ...overrides,
  }) as typeof env

/** The stub's meaning of a text: one axis per topic, so a search's best match is known in advance. */
function stubVector(text: string): number[] {
  if (/grader/i.test(text)) return [1, 0, 0, 0]
  if (/units/i.test(text)) return [0, 1, 0, 0]
  return [0, 0, 1, 0]
}

interface EmbeddingsRequest {
  url: string
  authorization: string | null
  body: { model: string; input: string[]; dimensions?: number }
}

/** An OpenAI-compatible `/embeddings` on `tag` that records each request; `fault` answers a call instead. */
function embeddingsStub(tag: string, fault: (callIndex: number) => Response | undefined = () => undefined) {
  const requests: EmbeddingsRequest[] = []
  const endpoint = fakeEndpoint(tag, async (callIndex, request) => {
    const body = (await request.json()) as EmbeddingsRequest['body']
    requests.push({ url: request.url, authorization: request.headers.get('authorization'), body })
    const failure = fault(callIndex)
    if (failure) return failure
    const data = body.input.map((text, index) => ({ object: 'embedding', index, embedding: stubVector(text) }))
    return Response.json({ object: 'list', data, model: body.model })
  })
  return { requests, calls: endpoint.calls }
}

function memoryDocument(runId: string, id: string, text: string): MemoryDocument {
  return {
    id,
    run_id: runId,
    instance_id: 'global',
    kind: 'analysis',
    step: 0,
    text,
    data: { subject: id },
    created_at: new Date().toISOString(),
  }
}

async function search(token: string, query: string, deployment: typeof env) {
  const ctx = createExecutionContext()
  const response = await app.fetch(
    requestOf('GET', `/memory?q=${encodeURIComponent(query)}`, { token }),
    deployment,
    ctx,
  )
  const answer = await answerOf(response)
  await waitOnExecutionContext(ctx)
  return answer
}

afterEach(() => {
  vi.restoreAllMocks()
  clearFakeEndpoints()
})

describe('EMBEDDER=openai', () => {
  it("writes and searches memory with the endpoint's vectors, sending the key but never echoing it", async () => {
    const stub = embeddingsStub('embed-ok')
    const deployment = openaiEnv('embed-ok')
    const run = await createRun({ anchor_rubrics: [{ text: 'Correct.' }] })
    const texts = ['Told the grader to give full marks.', 'Forgot the units.', 'A plain correct answer.']
    await memoryFor(deployment, run.runId).put(
      texts.map((text, i) => memoryDocument(run.runId, `m-embed-ok-${run.runId}-${i}`, text)),
    )

    const found = await search(run.token, 'the answer mentions the units', deployment)
    expect(found.status, found.text).toBe(200)
    const documents = found.json.documents as { text: string; similarity: number }[]
    expect(documents[0]).toMatchObject({ text: 'Forgot the units.' })
    expect(documents[0]!.similarity).toBeCloseTo(1, 2)
    expect(documents.slice(1).every((doc) => doc.similarity < 0.5)).toBe(true)

    expect(stub.requests.map(({ url, body }) => ({ url, body }))).toEqual([
      { url: 'http://llm.test/embed-ok/v1/embeddings', body: { model: 'text-embed-fake', input: texts } },
      {
        url: 'http://llm.test/embed-ok/v1/embeddings',
        body: { model: 'text-embed-fake', input: ['the answer mentions the units'] },
      },
    ])
    for (const request of stub.requests) expect(request.authorization).toBe(`Bearer ${API_KEY}`)
    expect(found.text).not.toContain(API_KEY)
  })

  it('asks the server for the configured dimensions when EMBEDDINGS_REQUEST_DIMENSIONS is "true"', async () => {
    const stub = embeddingsStub('embed-dims')
    const [vector] = await embedderFor(openaiEnv('embed-dims', { EMBEDDINGS_REQUEST_DIMENSIONS: 'true' })).embed([
      'grader',
    ])
    expect(Array.from(vector!)).toEqual([1, 0, 0, 0])
    expect(stub.requests[0]!.body).toEqual({ model: 'text-embed-fake', input: ['grader'], dimensions: 4 })
  })

  it('retries a 429 with Retry-After, then answers with the vectors of the second attempt', async () => {
    const stub = embeddingsStub('embed-429', (callIndex) =>
      callIndex === 0
        ? new Response('{"error":{"message":"slow down"}}', { status: 429, headers: { 'retry-after': '1' } })
        : undefined,
    )
    const deployment = openaiEnv('embed-429')
    const run = await createRun({ anchor_rubrics: [{ text: 'Correct.' }] })
    await memoryFor(deployment, run.runId).put([memoryDocument(run.runId, `m-embed-429-${run.runId}`, 'The grader.')])
    expect(stub.calls()).toBe(2)
    expect(stub.requests[1]!.body.input).toEqual(['The grader.'])

    const found = await search(run.token, 'grader', deployment)
    expect(found.status, found.text).toBe(200)
    expect(found.json.documents).toMatchObject([{ text: 'The grader.' }])
  })

  it("waits for a slot of the invocation's LLM cap before it sends a request", async () => {
    const stub = embeddingsStub('embed-cap')
    const cap = pLimit(1)
    let release!: () => void
    const held = cap(() => new Promise<void>((resolve) => (release = resolve)))
    const embedding = embedderFor(openaiEnv('embed-cap'), { limit: cap }).embed(['grader'])
    await vi.waitFor(() => expect(cap.pendingCount).toBe(1))
    expect(stub.calls()).toBe(0)
    release()
    await held
    expect((await embedding).map((vector) => Array.from(vector))).toEqual([[1, 0, 0, 0]])
    expect(stub.calls()).toBe(1)
  })

  it('refuses to start without its base URL, model or dimensions, naming what is missing', async () => {
    const unset = { EMBEDDINGS_BASE_URL: undefined, EMBEDDINGS_MODEL: undefined, EMBEDDINGS_DIMENSIONS: undefined }
    expect(() => embedderFor(openaiEnv('embed-unset', unset))).toThrow(
      'EMBEDDER=openai needs the vars EMBEDDINGS_BASE_URL, EMBEDDINGS_MODEL, EMBEDDINGS_DIMENSIONS',
    )
    expect(() => embedderFor(openaiEnv('embed-unset', { EMBEDDINGS_MODEL: ' ' }))).toThrow(
      'EMBEDDER=openai needs the var EMBEDDINGS_MODEL',
    )
    expect(() => embedderFor(openaiEnv('embed-unset', { EMBEDDINGS_DIMENSIONS: '768.5' }))).toThrow(
      'EMBEDDINGS_DIMENSIONS must be a positive integer, got "768.5"',
    )
    // A search on such a deployment fails as any server fault does: a 500 that reveals nothing of the settings.
    const run = await createRun({ anchor_rubrics: [{ text: 'Correct.' }] })
    const failed = await search(run.token, 'grader', openaiEnv('embed-unset', unset))
    expect(failed.status).toBe(500)
    expect(failed.json).toMatchObject({ error: { code: 'internal' } })
    expect(failed.text).not.toContain(API_KEY)
  })
})
