import { redactUrl } from '../credentials/index.ts'
import { abortScope } from './abort.ts'
import { responseFormatFor, type ResponseFormat } from './response-format.ts'
import { parseRetryAfter } from './retry.ts'
import { LlmError, type ChatMessage, type ChatModel, type ChatRequest, type ChatResponse } from './types.ts'

/** `max_tokens` of a request when neither the role's settings nor the request say how long its reply may be. */
export const DEFAULT_MAX_TOKENS = 1_024

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
export type HttpFetch = (
  url: string,
  init?: { method?: string; headers?: Record<string, string>; body?: string; signal?: AbortSignal },
) => Promise<HttpReply>

export interface OpenAIChatSettings {
  baseURL: string
  apiKey: string
  /** Extra headers on every request (e.g. Cloudflare Access service-token headers). */
  headers?: Record<string, string>
  model: string
  temperature: number
  /** Unset: each request's own `maxTokens`, else {@link DEFAULT_MAX_TOKENS}. */
  maxTokens?: number
  /** `json_schema`: the server enforces a request's `jsonSchema` (vLLM's guided decoding); default `json_object`. */
  structuredOutput?: 'json_object' | 'json_schema'
  timeoutMs: number
  seed?: number
  /** How requests are sent; default the global `fetch`. */
  fetch?: HttpFetch
}

/** The parts of an OpenAI chat completion this adapter reads. */
interface ChatCompletion {
  model?: string
  choices?: { finish_reason?: string; message?: { content?: unknown } }[]
  usage?: { prompt_tokens?: number; completion_tokens?: number }
}

/**
 * Any OpenAI-compatible chat server (OpenAI, vLLM, Ollama, OpenRouter): one call is one `fetch` of
 * `POST {baseURL}/chat/completions`, so `withRetry` counts every attempt. Plain `fetch` rather than the openai SDK:
 * the SDK's request building and response handling cost about 15% of the Worker's CPU per `/rm` score (bench:rm
 * `--profile`), for one JSON request this adapter's error classification already covers.
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
   * One chat completion: exactly one HTTP request. `extras` sets a per-request JSON schema or seed.
   * @example const reply = await model.complete(request, { seed: 3 })
   */
  async complete(request: ChatRequest, extras: RequestExtras = {}): Promise<ChatResponse> {
    const scope = abortScope([request.signal], this.settings.timeoutMs)
    const seed = extras.seed ?? this.settings.seed
    const responseFormat =
      extras.responseFormat ?? responseFormatFor(request, this.settings.structuredOutput ?? 'json_object')
    const maxTokens = this.settings.maxTokens ?? request.maxTokens ?? DEFAULT_MAX_TOKENS
    const body = JSON.stringify({
      model: this.settings.model,
      messages: request.messages.map(toWire),
      temperature: this.settings.temperature,
      max_tokens: maxTokens,
      ...(seed === undefined ? {} : { seed }),
      ...(responseFormat ? { response_format: responseFormat } : {}),
    })
    let completion: ChatCompletion
    try {
      const send = this.settings.fetch ?? fetch
      const response = await send(this.#url, { method: 'POST', headers: this.#headers, body, signal: scope.signal })
      if (!response.ok) throw await refusal(response)
      completion = (await response.json()) as ChatCompletion
    } catch (error) {
      throw classify(error, scope.timedOut())
    } finally {
      scope.release()
    }
    const choice = completion.choices?.[0]
    const text = choice?.message?.content
    if (typeof text !== 'string' || text.trim() === '')
      throw new LlmError('invalid_reply', 'the model returned no message content')
    // A reply cut at max_tokens must not reach JSON repair: `"grade":10` cut to `"grade":1` would be read as a valid
    // grade.
    if (choice?.finish_reason === 'length')
      throw new LlmError('invalid_reply', `the reply was cut at max_tokens (${maxTokens}); raise max_tokens`)
    return {
      text,
      model: completion.model ?? this.settings.model,
      usage: {
        prompt_tokens: completion.usage?.prompt_tokens ?? 0,
        completion_tokens: completion.usage?.completion_tokens ?? 0,
      },
    }
  }
}

/** A message as the server gets it: its parts when it has any (text + images), else its text. */
function toWire(message: ChatMessage): { role: string; content: unknown } {
  return { role: message.role, content: message.parts ?? message.content }
}

/** A non-2xx answer as an LlmError: its status, Retry-After and the server's own message when it sent one. */
async function refusal(response: HttpReply): Promise<LlmError> {
  const text = await response.text().catch(() => '')
  let message = text.slice(0, 500)
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown }
    const said = typeof parsed.error === 'string' ? parsed.error : (parsed.error?.message ?? parsed.message)
    if (typeof said === 'string') message = said
  } catch {
    // not JSON: the text itself is the message
  }
  const status = response.status
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
