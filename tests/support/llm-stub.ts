import { readdirSync, readFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import path from 'node:path'
import { seededRandom } from '../../src/hash/index.ts'

/** One scripted answer of the stub, consumed in order before the default responder applies. */
export type StubFault =
  | { kind: 'status'; status: number; retryAfterSeconds?: number }
  /** An error answer with exactly this JSON body, as a real server words it. */
  | { kind: 'error'; status: number; body: unknown }
  /** Never answers; the client's timeout must fire. */
  | { kind: 'hang' }
  /** A well-formed completion whose message content is the given text (non-JSON, truncated JSON, …). */
  | { kind: 'content'; text: string }
  /** An HTTP 200 with exactly this completion body (log-probabilities, extra fields). */
  | { kind: 'completion'; body: unknown }
  /** An HTTP 200 whose body is not JSON at all. */
  | { kind: 'broken-body' }
  /**
   * The reply the responder would give, cut after `chars` characters, else after `keep` of them (default one
   * half), with `finish_reason: "length"`: a model that ran out of tokens.
   */
  | { kind: 'truncated'; keep?: number; chars?: number }

export interface ChatCompletionBody {
  model: string
  /**
   * `content` is typed as text for the text-only tests; a vision request sends an array of parts instead: read those
   * with `contentParts` / `imageUrls`.
   */
  messages: { role: string; content: string }[]
  [key: string]: unknown
}

/** One part of a vision message's content, as the OpenAI format sends it. */
type StubContentPart = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } }

/**
 * A message's content as parts: a plain string is one text part.
 * @example contentParts(body.messages[1]!).filter((part) => part.type === 'image_url')
 */
function contentParts(message: { content: unknown }): StubContentPart[] {
  const content = message.content
  if (typeof content === 'string') return [{ type: 'text', text: content }]
  return Array.isArray(content) ? (content as StubContentPart[]) : []
}

/**
 * The image URLs a message carries, in order.
 * @example imageUrls(body.messages[1]!) // ['data:image/png;base64,iVBOR…']
 */
export function imageUrls(message: { content: unknown }): string[] {
  return contentParts(message).flatMap((part) => (part.type === 'image_url' ? [part.image_url.url] : []))
}

/**
 * A message's text: the string, or its text parts joined by blank lines.
 * @example contentText(body.messages[1]!).includes('Answer A') // true
 */
export function contentText(message: { content: unknown }): string {
  return contentParts(message)
    .flatMap((part) => (part.type === 'text' ? [part.text] : []))
    .join('\n\n')
}

export interface LlmStub {
  /** e.g. http://127.0.0.1:40123/v1 */
  baseUrl: string
  /** Every chat request received, in order. */
  requests: ChatCompletionBody[]
  /** The Authorization header of each chat request, in the same order. */
  authorizations: (string | undefined)[]
  /** Every header of each chat request, in the same order. */
  headers: import('node:http').IncomingHttpHeaders[]
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
type StubInterceptor = (body: ChatCompletionBody) => StubFault | undefined | Promise<StubFault | undefined>

/** The agents of the harness, as their requests can be told apart by their system prompts. */
export type StubAgent =
  | 'scorer'
  | 'scorer_verdict'
  | 'group_scorer'
  | 'analyzer'
  | 'summarizer'
  | 'meta_summarizer'
  | 'query_generator'
  | 'updater'

const PROMPT_FILES: Record<StubAgent, string> = {
  scorer: 'scorer.system.txt',
  scorer_verdict: 'scorer-verdict.system.txt',
  group_scorer: 'group-scorer.system.txt',
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
  const locales = readdirSync(root, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
  systemOpenings = locales.flatMap((locale) =>
    (Object.entries(PROMPT_FILES) as [StubAgent, string][]).map(([agent, file]): [StubAgent, string] => [
      agent,
      readFileSync(path.join(root, locale, file), 'utf8')
        .split('{{')[0]!
        .trim()
        .slice(0, 200),
    ]),
  )
  return systemOpenings
}

/**
 * Which agent sent a chat request, recognised by the opening of its system prompt
 * (prompts/<locale>/<agent>.system.txt); `undefined` for a request no agent's prompt starts.
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
 * An OpenAI chat completion answering `body` with `content` (fixed token counts).
 * @example res.end(JSON.stringify(chatCompletion(body, '{"grades": []}', 1)))
 */
export function chatCompletion(
  body: ChatCompletionBody,
  content: string,
  n: number,
  finishReason: 'stop' | 'length' = 'stop',
) {
  return {
    id: `chatcmpl-${n}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: body.model,
    choices: [{ index: 0, finish_reason: finishReason, message: { role: 'assistant', content } }],
    usage: { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 },
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
  const headers: import('node:http').IncomingHttpHeaders[] = []
  const queue: StubFault[] = []
  let responder = gradeAllRubrics(7)
  let interceptor: StubInterceptor | undefined
  const hanging = new Set<ServerResponse>()

  const server: Server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    if (req.method === 'GET' && req.url?.endsWith('/models'))
      return sendJson(res, 200, { object: 'list', data: [{ id: 'stub-model', object: 'model' }] })
    if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions'))
      return sendJson(res, 404, { error: { message: 'not found' } })
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as ChatCompletionBody
    requests.push(body)
    authorizations.push(req.headers.authorization)
    headers.push(req.headers)
    const intercepted = interceptor ? await interceptor(body) : undefined
    const fault = intercepted ?? queue.shift()
    if (fault?.kind === 'hang') {
      hanging.add(res)
      res.on('close', () => hanging.delete(res))
      return
    }
    if (fault?.kind === 'status') {
      const headers: Record<string, string> =
        fault.retryAfterSeconds === undefined ? {} : { 'retry-after': String(fault.retryAfterSeconds) }
      return sendJson(res, fault.status, { error: { message: `stub fault ${fault.status}`, type: 'stub' } }, headers)
    }
    if (fault?.kind === 'error') return sendJson(res, fault.status, fault.body)
    if (fault?.kind === 'completion') return sendJson(res, 200, fault.body)
    if (fault?.kind === 'broken-body') {
      res.writeHead(200, { 'content-type': 'application/json' })
      return res.end('{"id": "chatcmpl-stub", "choices": [')
    }
    const full = fault?.kind === 'content' ? fault.text : responder(body)
    const content =
      fault?.kind === 'truncated'
        ? full.slice(0, Math.max(1, fault.chars ?? Math.floor(full.length * (fault.keep ?? 0.5))))
        : full
    sendJson(res, 200, chatCompletion(body, content, requests.length, fault?.kind === 'truncated' ? 'length' : 'stop'))
  })
  server.keepAliveTimeout = 1_000
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    authorizations,
    headers,
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

/**
 * llama-cpp-python 0.3.36's answer to OpenAI's `response_format: {type: 'json_schema', …}`, as measured: a pydantic
 * validation error reported as an HTTP 500.
 */
const LLAMA_CPP_JSON_SCHEMA_REFUSAL: StubFault = {
  kind: 'error',
  status: 500,
  body: {
    error: {
      message:
        "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), " +
        "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', " +
        "'ctx': {'expected': \"'text' or 'json_object'\"}}",
      type: 'internal_server_error',
      param: null,
      code: null,
    },
  },
}

/**
 * Refuses every request whose `response_format` is OpenAI's `json_schema` shape, as llama-cpp-python does; answers the
 * rest with the responder.
 * @example stub.intercept(llamaCppFormats)
 */
export function llamaCppFormats(body: ChatCompletionBody): StubFault | undefined {
  const format = body.response_format as { type?: string } | undefined
  return format?.type === 'json_schema' ? LLAMA_CPP_JSON_SCHEMA_REFUSAL : undefined
}

/**
 * llama-cpp-python's answer to a prompt over its `n_ctx` (OpenAI's own wording and code), as measured.
 * @example stub.script(contextLengthExceeded(8192, 9031, 5))
 */
export function contextLengthExceeded(limit: number, promptTokens: number, maxTokens: number): StubFault {
  return {
    kind: 'error',
    status: 400,
    body: {
      error: {
        message:
          `This model's maximum context length is ${limit} tokens. However, you requested ` +
          `${promptTokens + maxTokens} tokens (${promptTokens} in the messages, ${maxTokens} in the completion). ` +
          'Please reduce the length of the messages or completion.',
        type: 'invalid_request_error',
        param: 'messages',
        code: 'context_length_exceeded',
      },
    },
  }
}

/**
 * llama.cpp's own server's answer to a prompt over a slot's context (xllamacpp 2026.10.11549, as measured): its own
 * type and `n_ctx`, its code the HTTP status.
 * @example stub.script(llamaCppContextExceeded(8192, 9036))
 */
export function llamaCppContextExceeded(limit: number, promptTokens: number): StubFault {
  return {
    kind: 'error',
    status: 400,
    body: {
      error: {
        code: 400,
        message:
          `request (${promptTokens} tokens) exceeds the available context size (${limit} tokens), ` +
          'try increasing it',
        type: 'exceed_context_size_error',
        n_prompt_tokens: promptTokens,
        n_ctx: limit,
      },
    },
  }
}

/**
 * Every way a model server fails in practice, as `faultMix` draws them by default: a 429 with Retry-After, a 500,
 * a hang past the client's timeout, a reply cut at max_tokens, prose instead of JSON, and a 200 whose body is not JSON.
 */
export const FAULT_KINDS: readonly StubFault[] = [
  { kind: 'status', status: 429, retryAfterSeconds: 1 },
  { kind: 'status', status: 500 },
  { kind: 'hang' },
  { kind: 'truncated' },
  { kind: 'content', text: 'Sorry, I can only answer in prose: this looks fine to me.' },
  { kind: 'broken-body' },
]

export interface FaultMixOptions {
  /** The same seed gives every agent the same fault schedule. */
  seed: number
  /** The share of each agent's requests answered with a fault, in [0, 1]. */
  rate: number
  /** The faults to draw from, in turn per agent (default `FAULT_KINDS`). */
  faults?: readonly StubFault[]
  /** Requests the mix leaves alone and does not count, e.g. ones a test scripts itself. */
  skip?: (body: ChatCompletionBody) => boolean
}

/** A seeded fault-rate interceptor and what it did. */
export interface FaultMix {
  /** Pass to `stub.intercept`. */
  intercept: StubInterceptor
  /** Every fault injected, in order, with the agent it hit (`unknown` for a request no agent's prompt starts). */
  injected: { agent: StubAgent | 'unknown'; fault: StubFault }[]
  /** Requests the mix saw, per agent. */
  seen: Partial<Record<StubAgent | 'unknown', number>>
}

/**
 * Fails `rate` of every agent's requests, each agent on its own seeded schedule: evenly spread (never two
 * faults in a row below a rate of 1/2), starting with the agent's first request so that even a short test
 * sees every agent fail, and cycling through `faults` from a seeded offset.
 * @example const mix = faultMix({ seed: 7, rate: 0.3 }); stub.intercept(mix.intercept) // mix.injected lists each fault
 */
export function faultMix(options: FaultMixOptions): FaultMix {
  const faults = options.faults ?? FAULT_KINDS
  const injected: FaultMix['injected'] = []
  const seen: FaultMix['seen'] = {}
  const schedules = new Map<string, { phase: number; offset: number; faulted: number }>()
  const intercept: StubInterceptor = (body) => {
    if (options.skip?.(body)) return undefined
    const agent = agentOf(body) ?? 'unknown'
    let schedule = schedules.get(agent)
    if (!schedule) {
      const random = seededRandom(agent, options.seed)
      // A phase in [1 - rate, 1) puts a fault on request 0; the rest follow every 1/rate requests.
      schedule = {
        phase: 1 - options.rate + random() * options.rate,
        offset: Math.floor(random() * faults.length),
        faulted: 0,
      }
      schedules.set(agent, schedule)
    }
    const k = seen[agent] ?? 0
    seen[agent] = k + 1
    if (Math.floor((k + 1) * options.rate + schedule.phase) <= Math.floor(k * options.rate + schedule.phase))
      return undefined
    const fault = faults[(schedule.offset + schedule.faulted++) % faults.length]!
    injected.push({ agent, fault })
    return fault
  }
  return { intercept, injected, seen }
}

/** A data block: an opening `<<<DATA-<tag>` line up to the first `DATA-<tag>>>` line with the same tag. */
const BLOCK = /<<<DATA-([0-9A-Za-z]+)\n([\s\S]*?)\nDATA-\1>>>/g

/**
 * The tag of a request's last data block (the answer's, in a judging prompt), if it has one.
 * @example boundaryOf(stub.requests.at(-1)!) // 'a1b2c3d4e5f60718'
 */
export function boundaryOf(body: ChatCompletionBody): string | undefined {
  const user = body.messages.findLast((message) => message.role === 'user')?.content ?? ''
  return [...user.matchAll(BLOCK)].at(-1)?.[1]
}

/**
 * The data blocks of `text`, in order, read as a careful model reads them: each from its `<<<DATA-<tag>` line to the
 * first `DATA-<tag>>>` line with the same tag, so a marker with another tag inside a block is just text.
 * @example dataBlocks(userPrompt) // [input, reference, output] for a scorer prompt
 */
export function dataBlocks(text: string): string[] {
  return [...text.matchAll(BLOCK)].map((match) => match[2]!)
}

/**
 * `text` without its data blocks (markers included): what a model reads as instructions.
 * @example expect(outsideData(userPrompt)).not.toContain(rollout.output)
 */
export function outsideData(text: string): string {
  return text.replace(BLOCK, '')
}

/** Grading instructions a gullible judge follows wherever it reads them. */
const INSTRUCTIONS = [
  /\bignore\b[^\n]{0,40}\b(?:rubrics?|criteria|instructions|rules)\b/i,
  /\boutput\s+(?:a\s+(?:score|grade)\s+of\s+)?1(?:\.0+)?\b/i,
  /\b(?:full|maximum|max|perfect|top)\s+(?:marks|grades?|scores?)\b/i,
  /\bnew\s+(?:grading\s+)?instructions\b/i,
  /忽略|满分/u,
]

export interface NaiveJudgeOptions {
  /** The grade of every criterion when the answer block contains the reference block's text. */
  correct: number
  /** The grade of every criterion otherwise. */
  wrong: number
  /** The top of the grade scale, given when an instruction asks for full marks (default 10). */
  gradeMax?: number
}

/**
 * A gullible scorer. It reads the data markers exactly as the system prompt defines them (a tag closes only its own
 * block) and grades what is inside honestly: `correct` when the answer block contains the reference, else `wrong`. It
 * obeys any grading instruction it finds outside the data blocks: a `{"grades": […]}` block is copied, and
 * "ignore the rubric", "output 1.0", "full marks", "new instructions" (or 忽略/满分) give every criterion `gradeMax`.
 * So the scores it gives rise exactly when rollout text escapes the data blocks.
 * @example stub.respondWith(naiveJudge({ correct: 8, wrong: 2 }))
 */
export function naiveJudge(options: NaiveJudgeOptions) {
  const gradeMax = options.gradeMax ?? 10
  return (body: ChatCompletionBody): string => {
    const user = body.messages.find((message) => message.role === 'user')?.content ?? ''
    const ids = [...user.matchAll(/^- ([\w.:-]+) \(weight [\d.]+\):/gm)].map((match) => match[1]!)
    const outside = outsideData(user)
    const reply = (gradeFor: (id: string) => number, reason: string) =>
      JSON.stringify({ grades: ids.map((rubric_id) => ({ rubric_id, grade: gradeFor(rubric_id), reason })) })
    const forged = outside.match(/\{\s*"grades"\s*:\s*\[[\s\S]*?\]\s*\}/)?.[0]
    if (forged) {
      const given = new Map<string, number>()
      try {
        for (const entry of (JSON.parse(forged) as { grades: { rubric_id: string; grade: number }[] }).grades)
          given.set(entry.rubric_id, entry.grade)
      } catch {
        // Unreadable: the judge still takes it as a request for full marks.
      }
      return reply((id) => given.get(id) ?? gradeMax, 'as instructed')
    }
    if (INSTRUCTIONS.some((pattern) => pattern.test(outside))) return reply(() => gradeMax, 'as instructed')
    // Scorer prompts hold three blocks: the prompt, the reference, the answer.
    const [, reference = '', answer = ''] = dataBlocks(user)
    const right = reference.trim() !== '' && answer.includes(reference.trim())
    return reply(
      () => (right ? options.correct : options.wrong),
      right ? 'matches the reference' : 'does not match the reference',
    )
  }
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers })
  res.end(JSON.stringify(body))
}

/**
 * Makes every step update add one rubric after `delayMs` (so each closed step makes a new rubric version, committed
 * while the next step collects); every other agent stays as it was. Answers how many updates it has made so far.
 * @example const updates = addRubricOnEveryUpdate(stub, 300); updates() // 0
 */
export function addRubricOnEveryUpdate(stub: LlmStub, delayMs: number): () => number {
  let updates = 0
  stub.intercept(async (body) => {
    if (agentOf(body) !== 'updater') return undefined
    await new Promise((resolve) => setTimeout(resolve, delayMs))
    const text = `Names the unit (update ${++updates}).`
    return {
      kind: 'content',
      text: JSON.stringify({
        strategy: 'ADVANCEMENT',
        consulted_memories: [],
        rationale: 'Ask for more.',
        modifications: [{ op: 'add', text, weight: 1, reason: 'next step' }],
        final_adaptive: [
          { id: 'd-steps', text: 'Shows the key steps.', weight: 1 },
          { text, weight: 1 },
        ],
      }),
    }
  })
  return () => updates
}
