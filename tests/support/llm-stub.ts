import { readdirSync, readFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import path from 'node:path'

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
  /**
   * Sees every chat request (after it is recorded) before the scripted faults and the responder: it may
   * wait (a slow model) and may answer with a fault of its own; `undefined` lets the request through.
   * Pass `undefined` to remove it.
   */
  intercept(interceptor: StubInterceptor | undefined): void
  close(): Promise<void>
}

/** Runs before a request is answered; may wait, and may return a fault to answer with instead. */
export type StubInterceptor = (body: ChatCompletionBody) => StubFault | undefined | Promise<StubFault | undefined>

/** The agents of the harness, as their requests can be told apart by their system prompts. */
export type StubAgent = 'scorer' | 'analyzer' | 'summarizer' | 'meta_summarizer' | 'query_generator' | 'updater'

const PROMPT_FILES: Record<StubAgent, string> = {
  scorer: 'scorer.system.txt',
  analyzer: 'analyzer.system.txt',
  summarizer: 'summarizer.system.txt',
  meta_summarizer: 'meta-summarizer.system.txt',
  query_generator: 'query-generator.system.txt',
  updater: 'updater.system.txt',
}

/** Per agent, the opening of its system prompt in every locale (the text before the first placeholder). */
let systemOpenings: [StubAgent, string][] | undefined
function openings(): [StubAgent, string][] {
  if (systemOpenings) return systemOpenings
  const root = path.join(import.meta.dirname, '../../prompts')
  const locales = readdirSync(root, { withFileTypes: true }).filter((entry) => entry.isDirectory()).map((entry) => entry.name)
  systemOpenings = locales.flatMap((locale) =>
    (Object.entries(PROMPT_FILES) as [StubAgent, string][]).map(([agent, file]): [StubAgent, string] => [
      agent,
      readFileSync(path.join(root, locale, file), 'utf8').split('{{')[0]!.trim().slice(0, 200),
    ]),
  )
  return systemOpenings
}

/**
 * Which agent sent a chat request, recognised by the opening of its system prompt (prompts/<locale>/<agent>.system.txt);
 * `undefined` for a request no agent's prompt starts.
 * @example stub.respondWith((body) => (agentOf(body) === 'scorer' ? grades(body) : analysis(body)))
 */
export function agentOf(body: ChatCompletionBody): StubAgent | undefined {
  const system = body.messages.find((message) => message.role === 'system')?.content.trim() ?? ''
  return openings().find(([, opening]) => opening !== '' && system.startsWith(opening))?.[0]
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
  let interceptor: StubInterceptor | undefined
  const hanging = new Set<ServerResponse>()

  const server: Server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    if (req.method === 'GET' && req.url?.endsWith('/models')) return sendJson(res, 200, { object: 'list', data: [{ id: 'stub-model', object: 'model' }] })
    if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) return sendJson(res, 404, { error: { message: 'not found' } })
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as ChatCompletionBody
    requests.push(body)
    authorizations.push(req.headers.authorization)
    const intercepted = interceptor ? await interceptor(body) : undefined
    const fault = intercepted ?? queue.shift()
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
    intercept: (next) => void (interceptor = next),
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
