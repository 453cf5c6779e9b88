import type OpenAI from 'openai'
import { parseRetryAfter } from './retry.ts'
import { LlmError, type ChatMessage, type ChatModel, type ChatRequest, type ChatResponse } from './types.ts'

/** A `response_format` an OpenAI-compatible server takes. */
export type ResponseFormat =
  | { type: 'json_object' }
  | {
      type: 'json_schema'
      json_schema: { name: string; schema: Record<string, unknown>; strict: boolean; description?: string }
    }

/** Per-request options beyond `ChatRequest`; unset fields fall back to the model's settings. */
export interface RequestExtras {
  responseFormat?: ResponseFormat
  seed?: number
}

export interface OpenAIChatSettings {
  baseURL: string
  apiKey: string
  /** Extra headers on every request (e.g. Cloudflare Access service-token headers). */
  headers?: Record<string, string>
  model: string
  temperature: number
  maxTokens: number
  timeoutMs: number
  seed?: number
}

/**
 * Any OpenAI-compatible chat server (OpenAI, vLLM, Ollama, OpenRouter) through the openai SDK.
 * One call is one HTTP request: the SDK's own retries are off so `withRetry` counts every attempt.
 * The SDK is imported lazily, so paths that never call a remote model do not pay for loading it.
 * @example const model = new OpenAIChatModel({ baseURL: 'http://127.0.0.1:8000/v1', apiKey: 'x', model:
 *   'Qwen/Qwen3-8B', temperature: 0, maxTokens: 1024, timeoutMs: 60000 })
 */
export class OpenAIChatModel implements ChatModel {
  readonly id: string
  #client: Promise<OpenAI> | undefined

  constructor(private readonly settings: OpenAIChatSettings) {
    this.id = `openai:${settings.baseURL}#${settings.model}`
  }

  /**
   * One chat completion: exactly one HTTP request. `extras` sets a per-request JSON schema or seed.
   * @example const reply = await model.complete(request, { seed: 3 })
   */
  async complete(request: ChatRequest, extras: RequestExtras = {}): Promise<ChatResponse> {
    const client = await (this.#client ??= import('openai').then(
      ({ default: OpenAI }) =>
        new OpenAI({
          baseURL: this.settings.baseURL,
          apiKey: this.settings.apiKey,
          maxRetries: 0,
          timeout: this.settings.timeoutMs,
          ...(this.settings.headers ? { defaultHeaders: this.settings.headers } : {}),
        }),
    ))
    const timeout = AbortSignal.timeout(this.settings.timeoutMs)
    const signal = request.signal ? AbortSignal.any([request.signal, timeout]) : timeout
    const seed = extras.seed ?? this.settings.seed
    const responseFormat = extras.responseFormat ?? (request.json ? { type: 'json_object' as const } : undefined)
    try {
      const completion = await client.chat.completions.create(
        {
          model: this.settings.model,
          messages: request.messages.map(toWire),
          temperature: this.settings.temperature,
          max_tokens: this.settings.maxTokens,
          ...(seed === undefined ? {} : { seed }),
          ...(responseFormat ? { response_format: responseFormat } : {}),
        },
        { signal },
      )
      const text = completion.choices?.[0]?.message?.content
      if (typeof text !== 'string' || text.trim() === '')
        throw new LlmError('invalid_reply', 'the model returned no message content')
      // A reply cut at max_tokens must not reach JSON repair: `"grade":10` cut to `"grade":1` would be read as a valid
      // grade.
      if (completion.choices[0]?.finish_reason === 'length')
        throw new LlmError(
          'invalid_reply',
          `the reply was cut at max_tokens (${this.settings.maxTokens}); raise max_tokens`,
        )
      return {
        text,
        model: completion.model ?? this.settings.model,
        usage: {
          prompt_tokens: completion.usage?.prompt_tokens ?? 0,
          completion_tokens: completion.usage?.completion_tokens ?? 0,
        },
      }
    } catch (error) {
      throw classify(error, timeout.aborted)
    }
  }
}

/** A message as the server gets it: its parts when it has any (text + images), else its text. */
function toWire(message: ChatMessage): OpenAI.Chat.Completions.ChatCompletionMessageParam {
  const content = message.parts ?? message.content
  return { role: message.role, content } as OpenAI.Chat.Completions.ChatCompletionMessageParam
}

function classify(error: unknown, timedOut: boolean): LlmError {
  if (error instanceof LlmError) return error
  const failure = error as { status?: number; headers?: Headers; name?: string; message?: string }
  if (timedOut || failure.name === 'APIConnectionTimeoutError')
    return new LlmError('timeout', 'the model did not answer in time')
  const status = failure.status
  if (status === undefined) {
    // A reply that is not JSON at all surfaces as a SyntaxError from the SDK's body parsing.
    if (failure.name === 'SyntaxError')
      return new LlmError('invalid_reply', `the server sent a body that is not JSON: ${failure.message}`)
    return new LlmError('network', `could not reach the model server: ${failure.message ?? String(error)}`)
  }
  const retryAfter = parseRetryAfter(failure.headers?.get?.('retry-after'))
  if (status === 429) return new LlmError('rate_limited', 'the model server is rate limiting (HTTP 429)', retryAfter)
  if (status === 408 || status >= 500)
    return new LlmError('server_error', `the model server failed (HTTP ${status})`, retryAfter)
  return new LlmError('bad_request', `the model server refused the request (HTTP ${status}): ${failure.message ?? ''}`)
}
