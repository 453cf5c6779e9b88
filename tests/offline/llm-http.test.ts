/**
 * The offline LLM pool's HTTP client (offline/llm/http.ts) against the OpenAI-compatible stub on loopback: what
 * OpenAIChatModel reads of an answer (status, Retry-After, body), and an abort ending a request that hangs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { nodeHttpFetch } from '../../offline/llm/http.ts'
import { OpenAIChatModel } from '../../src/llm/openai.ts'
import { LlmError } from '../../src/llm/types.ts'
import { startLlmStub, type LlmStub } from '../support/llm-stub.ts'

describe('nodeHttpFetch', () => {
  let stub: LlmStub
  beforeAll(async () => {
    stub = await startLlmStub()
  })
  afterAll(() => stub.close())

  const post = (signal?: AbortSignal) =>
    nodeHttpFetch(`${stub.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer k' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'é ✓' }] }),
      ...(signal ? { signal } : {}),
    })

  it('sends the body whole (multi-byte characters included) and reads a JSON answer', async () => {
    const reply = await post()
    expect(reply).toMatchObject({ ok: true, status: 200 })
    expect(await reply.json()).toMatchObject({ object: 'chat.completion', model: 'm' })
    expect(stub.requests.at(-1)?.messages).toEqual([{ role: 'user', content: 'é ✓' }])
    expect(stub.authorizations.at(-1)).toBe('Bearer k')
  })

  it('hands a refusal to the adapter with its status and Retry-After', async () => {
    stub.script({ kind: 'status', status: 429, retryAfterSeconds: 7 })
    const reply = await post()
    expect(reply).toMatchObject({ ok: false, status: 429 })
    expect(reply.headers.get('Retry-After')).toBe('7')
    expect(reply.headers.get('x-not-sent')).toBeNull()
    const model = new OpenAIChatModel({
      baseURL: stub.baseUrl,
      apiKey: 'k',
      model: 'm',
      temperature: 0,
      timeoutMs: 5_000,
      fetch: nodeHttpFetch,
    })
    stub.script({ kind: 'status', status: 429, retryAfterSeconds: 3 })
    const request = {
      role: 'verifier',
      task: 'search_verify',
      json: true,
      messages: [{ role: 'user' as const, content: 'x' }],
    }
    const refused = await model.complete(request).catch((error) => error)
    expect(refused).toBeInstanceOf(LlmError)
    expect(refused).toMatchObject({ kind: 'rate_limited', retryAfterSeconds: 3 })
  })

  it("rejects with the signal's reason when it aborts a request the server never answers", async () => {
    stub.script({ kind: 'hang' })
    const controller = new AbortController()
    const before = stub.requests.length
    const pending = post(controller.signal)
    await expect.poll(() => stub.requests.length).toBe(before + 1)
    const reason = new Error('caller gave up')
    controller.abort(reason)
    await expect(pending).rejects.toBe(reason)
  })
})
