import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/** One scripted answer of the stub, consumed in order before the default responder applies. */
export type StubFault =
  | { kind: 'status'; status: number; retryAfterSeconds?: number }
  /** Never answers; the client's timeout must fire. */
  | { kind: 'hang' }
  /** A well-formed completion whose message content is the given text (non-JSON, truncated JSON, …). */
  | { kind: 'content'; text: string }
  /** An HTTP 200 whose body is not JSON at all. */
  | { kind: 'broken-body' }

export interface ChatCompletionBody {
  model: string
  messages: { role: string; content: string }[]
  [key: string]: unknown
}

export interface LlmStub {
  /** e.g. http://127.0.0.1:40123/v1 */
  baseUrl: string
  /** Every chat request received, in order. */
  requests: ChatCompletionBody[]
  /** The Authorization header of each chat request, in the same order. */
  authorizations: (string | undefined)[]
  /** Queue answers for the next requests. */
  script(...faults: StubFault[]): void
  /** Replace the default responder (the message content for a good completion). */
  respondWith(responder: (body: ChatCompletionBody) => string): void
  close(): Promise<void>
}

/**
 * Grades every rubric listed in a scorer prompt (`- <id> (weight w): text`) with the same grade:
 * what a cooperative model would answer.
 * @example respondWith(gradeAllRubrics(7))
 */
export function gradeAllRubrics(grade: number) {
  return (body: ChatCompletionBody): string => {
    const user = body.messages.find((message) => message.role === 'user')?.content ?? ''
    const ids = [...user.matchAll(/^- ([\w.:-]+) \(weight [\d.]+\):/gm)].map((match) => match[1])
    return JSON.stringify({ grades: ids.map((rubric_id) => ({ rubric_id, grade, reason: 'stub' })) })
  }
}

/**
 * An OpenAI-compatible chat server on 127.0.0.1 with an ephemeral port, with injectable faults.
 * Serves `POST /v1/chat/completions` and `GET /v1/models`.
 * @example const stub = await startLlmStub(); stub.script({ kind: 'status', status: 429, retryAfterSeconds: 0 })
 */
export async function startLlmStub(): Promise<LlmStub> {
  const requests: ChatCompletionBody[] = []
  const authorizations: (string | undefined)[] = []
  const queue: StubFault[] = []
  let responder = gradeAllRubrics(7)
  const hanging = new Set<ServerResponse>()

  const server: Server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    if (req.method === 'GET' && req.url?.endsWith('/models')) return sendJson(res, 200, { object: 'list', data: [{ id: 'stub-model', object: 'model' }] })
    if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) return sendJson(res, 404, { error: { message: 'not found' } })
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as ChatCompletionBody
    requests.push(body)
    authorizations.push(req.headers.authorization)
    const fault = queue.shift()
    if (fault?.kind === 'hang') {
      hanging.add(res)
      res.on('close', () => hanging.delete(res))
      return
    }
    if (fault?.kind === 'status') {
      const headers: Record<string, string> = fault.retryAfterSeconds === undefined ? {} : { 'retry-after': String(fault.retryAfterSeconds) }
      return sendJson(res, fault.status, { error: { message: `stub fault ${fault.status}`, type: 'stub' } }, headers)
    }
    if (fault?.kind === 'broken-body') {
      res.writeHead(200, { 'content-type': 'application/json' })
      return res.end('{"id": "chatcmpl-stub", "choices": [')
    }
    const content = fault?.kind === 'content' ? fault.text : responder(body)
    sendJson(res, 200, {
      id: `chatcmpl-${requests.length}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: body.model,
      choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content } }],
      usage: { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 },
    })
  })
  server.keepAliveTimeout = 1_000
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    authorizations,
    script: (...faults) => void queue.push(...faults),
    respondWith: (next) => void (responder = next),
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of hanging) res.destroy()
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers })
  res.end(JSON.stringify(body))
}
