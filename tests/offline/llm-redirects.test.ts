/**
 * No redirect carries a secret (issue 46 item 2): a judge or embedder that answers 301/302/303/307/308 pointing at
 * another origin (another loopback address, another port, a name) is not followed: the listener there receives
 * nothing, neither the secret headers nor the prompt, and the call fails as a `bad_request` naming the redirect. A
 * redirect within the endpoint's own origin (a trailing slash added) is followed with the same method and body.
 * Both run on the global `fetch` (undici follows redirects by default, as workerd's does) against node:http
 * listeners on 127.0.0.1.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LlmError, OpenAIChatModel } from '../../src/llm/index.ts'
import { OpenAIEmbedder } from '../../src/memory/openai-embedder.ts'

/** What one listener received. */
interface Received {
  method: string
  url: string
  headers: IncomingHttpHeaders
  body: string
}

/** A listener on 127.0.0.1 that records every request and answers it with `answer`. */
async function listener(
  answer: (request: Received) => { status: number; headers?: Record<string, string>; body?: string },
) {
  const received: Received[] = []
  const server: Server = createServer((req, res) => {
    let body = ''
    req.on('data', (chunk: Buffer) => (body += chunk.toString()))
    req.on('end', () => {
      const request = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body }
      received.push(request)
      const reply = answer(request)
      res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers })
      res.end(reply.body ?? '')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return { received, origin: `http://127.0.0.1:${port}`, close: () => new Promise((done) => server.close(done)) }
}

const COMPLETION = JSON.stringify({ choices: [{ message: { content: '{"ok": true}' } }], usage: {} })
const EMBEDDING = JSON.stringify({ data: [{ index: 0, embedding: [0.6, 0.8] }] })
const PROMPT = 'grade this: the secret prompt'

let elsewhere: Awaited<ReturnType<typeof listener>>
beforeAll(async () => {
  elsewhere = await listener((request) => ({
    status: 200,
    body: request.url.endsWith('/embeddings') ? EMBEDDING : COMPLETION,
  }))
})
afterAll(() => elsewhere.close())

/** Where a redirect can point that is not the judge's origin: other loopback spellings, another port. */
function otherOrigins(port: string): string[] {
  return [elsewhere.origin, `http://127.0.0.2:${port}`, `http://localhost:${port}`, `http://[::1]:${port}`]
}

function chatModel(baseURL: string) {
  return new OpenAIChatModel({
    baseURL,
    apiKey: 'sk-judge-key-0123456789abcdef',
    headers: { 'X-Judge-Secret': 'judge-secret-value', 'CF-Access-Client-Secret': 'access-secret-value' },
    model: 'judge',
    temperature: 0,
    timeoutMs: 10_000,
  })
}

const ask = { role: 'scorer', task: 'score', json: true, messages: [{ role: 'user' as const, content: PROMPT }] }

describe('redirects from a judge or an embedder', () => {
  it('are not followed to another origin, whatever the status and spelling: nothing reaches it', async () => {
    const port = new URL(elsewhere.origin).port
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(301, 302, 303, 307, 308),
        fc.constantFrom(...otherOrigins(port)),
        fc.constantFrom('chat', 'embeddings'),
        async (status, target, kind) => {
          const judge = await listener(() => ({ status, headers: { location: `${target}/v1/${kind}` } }))
          const before = elsewhere.received.length
          try {
            const call =
              kind === 'chat'
                ? chatModel(`${judge.origin}/v1`).complete(ask)
                : new OpenAIEmbedder({
                    baseURL: `${judge.origin}/v1`,
                    apiKey: 'sk-embed',
                    model: 'e',
                    dimensions: 2,
                  }).embed([PROMPT])
            const failure = await call.then(
              () => undefined,
              (error: unknown) => error,
            )
            expect(failure).toBeInstanceOf(LlmError)
            expect((failure as LlmError).kind).toBe('bad_request')
            expect((failure as LlmError).message).toMatch(/redirected \(HTTP \d+\) to .* another origin/)
            expect(elsewhere.received.length).toBe(before)
            expect(judge.received).toHaveLength(1)
          } finally {
            await judge.close()
          }
        },
      ),
      { numRuns: 20 },
    )
  })

  it('are followed within the origin, with the same method, body and headers', async () => {
    const judge = await listener((request) =>
      request.url === '/v1/chat/completions'
        ? { status: 307, headers: { location: '/v1/chat/completions/' } }
        : { status: 200, body: COMPLETION },
    )
    try {
      const reply = await chatModel(`${judge.origin}/v1`).complete(ask)
      expect(reply.text).toBe('{"ok": true}')
      expect(judge.received.map((request) => [request.method, request.url])).toEqual([
        ['POST', '/v1/chat/completions'],
        ['POST', '/v1/chat/completions/'],
      ])
      expect(judge.received[1]!.body).toContain(PROMPT)
      expect(judge.received[1]!.headers['x-judge-secret']).toBe('judge-secret-value')
    } finally {
      await judge.close()
    }
  })

  it('stop after a few hops within the origin', async () => {
    const judge = await listener((request) => ({ status: 302, headers: { location: `${request.url}x` } }))
    try {
      await expect(chatModel(`${judge.origin}/v1`).complete(ask)).rejects.toThrow(/redirected more than 3 times/)
      expect(judge.received).toHaveLength(4)
    } finally {
      await judge.close()
    }
  })
})
