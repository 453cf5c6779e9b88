import { redactUrl } from '../credentials/index.ts'
import { abortScope } from './abort.ts'
import {
  asJsonObjectSchema,
  DEFAULT_MAX_TOKENS,
  refusesJsonSchema,
  responseFormatFor,
  type ResponseFormat,
} from './response-format.ts'
import type { StructuredOutput } from '../schemas/structured-output.ts'
import { type OutgoingRequest, sendWithinOrigin } from './redirects.ts'
import { parseRetryAfter } from './retry.ts'
import {
  LlmError,
  type ChatMessage,
  type ChatModel,
  type ChatRequest,
  type ChatResponse,
  type TokenLogprob,
} from './types.ts'

/** Per-request options beyond `ChatRequest`; unset fields fall back to the model's settings. */
export interface RequestExtras {
  responseFormat?: ResponseFormat
  seed?: number
}

/** What the adapter reads of an HTTP answer: a `Response` has it all. */
export interface HttpReply {
  ok: boolean
  status: number
  headers: { get(name: string): string | null }
  text(): Promise<string>
  json(): Promise<unknown>
}

/** The part of `fetch` the adapter uses; a runtime with a cheaper HTTP client passes its own (offline/llm/http.ts). */
export type HttpFetch = (url: string, init?: OutgoingRequest) => Promise<HttpReply>

export interface OpenAIChatSettings {
  baseURL: string
  apiKey: string
  /** Extra headers on every request (e.g. Cloudflare Access service-token headers). */
  headers?: Record<string, string>
  model: string
  temperature: number
  /** Unset: each request's own `maxTokens`, else {@link DEFAULT_MAX_TOKENS}. */
  maxTokens?: number
  /**
   * How the server takes a request's `jsonSchema` ({@link StructuredOutput}); default `json_object` (no schema
   * sent). A server that refuses `json_schema`, taking only `text` and `json_object`, gets `json_object_schema`.
   */
  structuredOutput?: StructuredOutput
  timeoutMs: number
  seed?: number
  /** How requests are sent; default the global `fetch`. */
  fetch?: HttpFetch
}

/** The parts of an OpenAI chat completion this adapter reads. */
interface ChatCompletion {
  model?: string
  choices?: {
    finish_reason?: string
    message?: { content?: unknown }
    logprobs?: { content?: { top_logprobs?: unknown }[] | null } | null
  }[]
  usage?: { prompt_tokens?: number; completion_tokens?: number }
}

/**
 * Chat endpoints that refused OpenAI's `json_schema` shape and took llama-cpp-python's instead: learnt once per
 * endpoint and isolate, so only the first schema request to such a server pays the refused round trip.
 */
const takesJsonObjectSchema = new Set<string>()

/**
 * Any OpenAI-compatible chat server (OpenAI, vLLM, Ollama, OpenRouter, llama-cpp-python): one call is one `fetch` of
 * `POST {baseURL}/chat/completions`, so `withRetry` counts every attempt; the one exception is a server's first
 * refusal of OpenAI's `json_schema` shape, answered at once with the schema in its own shape. Plain `fetch` rather than
 * the openai SDK: the SDK's request building and response handling cost about 15% of the Worker's CPU per `/rm` score
 * (bench:rm `--profile`), for one JSON request this adapter's error classification already covers.
 * @example const model = new OpenAIChatModel({ baseURL: 'http://127.0.0.1:8000/v1', apiKey: 'x', model:
 *   'Qwen/Qwen3-8B', temperature: 0, maxTokens: 1024, timeoutMs: 60000 })
 */
export class OpenAIChatModel implements ChatModel {
  readonly id: string
  readonly #url: string
  readonly #headers: Record<string, string>

  constructor(private readonly settings: OpenAIChatSettings) {
    // The id names the model in call logs and archives: a URL credential must not travel with it.
    this.id = `openai:${redactUrl(settings.baseURL)}#${settings.model}`
    this.#url = `${settings.baseURL.replace(/\/+$/, '')}/chat/completions`
    this.#headers = {
      ...settings.headers,
      'content-type': 'application/json',
      accept: 'application/json',
      authorization: `Bearer ${settings.apiKey}`,
    }
  }

  /**
   * One chat completion: one HTTP request (two the first time a server refuses the `json_schema` shape). `extras` sets
   * a per-request JSON schema or seed. A reply cut at `max_tokens` and a prompt over the context window are failures
   * that say so (`details.cutAtMaxTokens`, kind `context_length`), never a reply.
   * @example const reply = await model.complete(request, { seed: 3 })
   */
  async complete(request: ChatRequest, extras: RequestExtras = {}): Promise<ChatResponse> {
    let format = extras.responseFormat ?? responseFormatFor(request, this.settings.structuredOutput ?? 'json_object')
    if (format && takesJsonObjectSchema.has(this.#url)) format = asJsonObjectSchema(format)
    try {
      return await this.#send(request, format, extras.seed)
    } catch (error) {
      const refused = error instanceof LlmError && error.kind === 'bad_request' && refusesJsonSchema(error.message)
      if (!refused || format?.type !== 'json_schema') throw error
      takesJsonObjectSchema.add(this.#url)
      return this.#send(request, asJsonObjectSchema(format), extras.seed)
    }
  }

  async #send(
    request: ChatRequest,
    responseFormat: ResponseFormat | undefined,
    requestSeed: number | undefined,
  ): Promise<ChatResponse> {
    const scope = abortScope([request.signal], this.settings.timeoutMs)
    const seed = requestSeed ?? this.settings.seed
    const maxTokens = this.settings.maxTokens ?? request.maxTokens ?? DEFAULT_MAX_TOKENS
    const body = JSON.stringify({
      model: this.settings.model,
      messages: request.messages.map(toWire),
      temperature: this.settings.temperature,
      max_tokens: maxTokens,
      ...(seed === undefined ? {} : { seed }),
      ...(responseFormat ? { response_format: responseFormat } : {}),
      ...(request.firstTokenAlternatives ? { logprobs: true, top_logprobs: request.firstTokenAlternatives } : {}),
    })
    let completion: ChatCompletion
    try {
      const send = this.settings.fetch ?? fetch
      const init = { method: 'POST', headers: this.#headers, body, signal: scope.signal }
      const response = await sendWithinOrigin(send, this.#url, init, 'the model server')
      if (!response.ok) throw await refusal(response)
      completion = (await response.json()) as ChatCompletion
    } catch (error) {
      throw classify(error, scope.timedOut())
    } finally {
      scope.release()
    }
    const choice = completion.choices?.[0]
    const text = choice?.message?.content
    const usage = {
      prompt_tokens: completion.usage?.prompt_tokens ?? 0,
      completion_tokens: completion.usage?.completion_tokens ?? 0,
    }
    // A reply cut at max_tokens must not reach JSON repair: `"grade":10` cut to `"grade":1` would be read as a valid
    // grade. Checked before the content, since a cut reply may be empty.
    const firstTokenLogprobs = request.firstTokenAlternatives ? topLogprobsOf(choice?.logprobs) : undefined
    if (choice?.finish_reason === 'length' && !(request.firstTokenAlternatives && typeof text === 'string' && text))
      throw new LlmError(
        'invalid_reply',
        `the reply was cut at max_tokens (${maxTokens}); raise max_tokens`,
        undefined,
        { cutAtMaxTokens: maxTokens, usage },
      )
    if (typeof text !== 'string' || text.trim() === '')
      throw new LlmError('invalid_reply', 'the model returned no message content', undefined, { usage })
    return {
      text,
      model: completion.model ?? this.settings.model,
      usage,
      ...(firstTokenLogprobs ? { firstTokenLogprobs } : {}),
    }
  }
}

/** The first reply token's alternatives as the server sent them; entries of another shape are left out. */
function topLogprobsOf(
  logprobs: NonNullable<ChatCompletion['choices']>[number]['logprobs'],
): TokenLogprob[] | undefined {
  const top = logprobs?.content?.[0]?.top_logprobs
  if (!Array.isArray(top)) return undefined
  return top.filter(
    (entry): entry is TokenLogprob =>
      typeof entry?.token === 'string' && typeof entry?.logprob === 'number' && Number.isFinite(entry.logprob),
  )
}

/** A message as the server gets it: its parts when it has any (text + images), else its text. */
function toWire(message: ChatMessage): { role: string; content: unknown } {
  return { role: message.role, content: message.parts ?? message.content }
}

/**
 * A non-2xx answer as an LlmError: its status, Retry-After and the server's own message when it sent one. A prompt
 * over the context window (OpenAI's `context_length_exceeded` or its message, which vLLM copies, or llama.cpp's
 * `exceed_context_size_error`) is a `context_length` failure naming the limit; a refusal of the `json_schema` shape is
 * a `bad_request` whatever its status (llama-cpp-python reports it as a 500), so it is never retried as it stands.
 */
async function refusal(response: HttpReply): Promise<LlmError> {
  const text = await response.text().catch(() => '')
  let message = text.slice(0, 500)
  let code: unknown
  let contextWindow: unknown
  try {
    const parsed = JSON.parse(text) as {
      error?: { message?: unknown; code?: unknown; type?: unknown; n_ctx?: unknown } | string
      message?: unknown
    }
    const said = typeof parsed.error === 'string' ? parsed.error : (parsed.error?.message ?? parsed.message)
    if (typeof said === 'string') message = said
    if (typeof parsed.error === 'object') {
      // llama.cpp's server: `{"type": "exceed_context_size_error", "n_ctx": 8192}`, its code the HTTP status.
      code = parsed.error.type === 'exceed_context_size_error' ? 'context_length_exceeded' : parsed.error.code
      contextWindow = parsed.error.n_ctx
    }
  } catch {
    // not JSON: the text itself is the message
  }
  const status = response.status
  const limit = message.match(/maximum context length is (\d+)/)
  if (status < 500 && (code === 'context_length_exceeded' || limit)) {
    const window = limit ? Number(limit[1]) : Number.isInteger(contextWindow) ? (contextWindow as number) : undefined
    return new LlmError(
      'context_length',
      `the prompt does not fit the model's context window${window ? ` of ${window} tokens` : ''} (HTTP ${status}): ` +
        message.slice(0, 300),
      undefined,
      window ? { contextLimit: window } : {},
    )
  }
  if (refusesJsonSchema(message))
    return new LlmError('bad_request', `the model server refused the response_format (HTTP ${status}): ${message}`)
  const retryAfter = parseRetryAfter(response.headers.get('retry-after'))
  if (status === 429) return new LlmError('rate_limited', 'the model server is rate limiting (HTTP 429)', retryAfter)
  if (status === 408 || status >= 500)
    return new LlmError('server_error', `the model server failed (HTTP ${status})`, retryAfter)
  return new LlmError('bad_request', `the model server refused the request (HTTP ${status}): ${message}`)
}

function classify(error: unknown, timedOut: boolean): LlmError {
  if (error instanceof LlmError) return error
  const failure = error as { name?: string; message?: string }
  if (timedOut) return new LlmError('timeout', 'the model did not answer in time')
  // A reply that is not JSON at all surfaces as a SyntaxError from parsing the body.
  if (failure.name === 'SyntaxError')
    return new LlmError('invalid_reply', `the server sent a body that is not JSON: ${failure.message}`)
  return new LlmError('network', `could not reach the model server: ${failure.message ?? String(error)}`)
}
