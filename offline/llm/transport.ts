/**
 * The one place the pool needs more than `OpenAIChatModel` offers: a per-request `response_format`
 * (JSON schema) and a per-request `seed`. Same contract as `OpenAIChatModel`: one call is exactly one
 * HTTP request (SDK retries off), failures are classified into `LlmError` kinds the same way.
 *
 * Plain requests do not come here: the pool sends them through `OpenAIChatModel` (src/llm/openai.ts).
 * If `OpenAIChatModel` ever accepts these two per-request options, this file can go.
 */
import type OpenAI from 'openai'
import type { OpenAIChatSettings } from '../../src/llm/openai.ts'
import { parseRetryAfter } from '../../src/llm/retry.ts'
import { LlmError, type ChatRequest, type ChatResponse } from '../../src/llm/types.ts'

/** A JSON schema for structured output, as OpenAI-compatible servers take it. */
export interface JsonSchemaFormat {
  /** a-z, A-Z, 0-9, _ and -, at most 64 characters. */
  name: string
  schema: Record<string, unknown>
  description?: string
  /** Default true. */
  strict?: boolean
}

export type ResponseFormat =
  | { type: 'json_object' }
  | { type: 'json_schema'; json_schema: { name: string; schema: Record<string, unknown>; strict: boolean; description?: string } }

/** What a request may set beyond `ChatRequest`. `undefined` fields fall back to the model's settings. */
export interface RequestExtras {
  responseFormat?: ResponseFormat
  seed?: number
}

/**
 * An OpenAI-compatible chat server with per-request `response_format` and `seed`; one HTTP request per call.
 * @example await new ExtendedOpenAIChatModel(settings).complete(request, { seed: 7, responseFormat: { type: 'json_object' } })
 */
export class ExtendedOpenAIChatModel {
  readonly id: string
  #client: Promise<OpenAI> | undefined

  constructor(private readonly settings: OpenAIChatSettings) {
    this.id = `openai:${settings.baseURL}#${settings.model}`
  }

  /**
   * Sends one chat completion request with the given extras.
   * @example const reply = await model.complete(request, { seed: 3 })
   */
  async complete(request: ChatRequest, extras: RequestExtras): Promise<ChatResponse> {
    const client = await (this.#client ??= import('openai').then(
      ({ default: OpenAI }) => new OpenAI({ baseURL: this.settings.baseURL, apiKey: this.settings.apiKey, maxRetries: 0, timeout: this.settings.timeoutMs }),
    ))
    const timeout = AbortSignal.timeout(this.settings.timeoutMs)
    const signal = request.signal ? AbortSignal.any([request.signal, timeout]) : timeout
    const seed = extras.seed ?? this.settings.seed
    const responseFormat = extras.responseFormat ?? (request.json ? { type: 'json_object' as const } : undefined)
    try {
      const completion = await client.chat.completions.create(
        {
          model: this.settings.model,
          messages: request.messages,
          temperature: this.settings.temperature,
          max_tokens: this.settings.maxTokens,
          ...(seed === undefined ? {} : { seed }),
          ...(responseFormat ? { response_format: responseFormat } : {}),
        },
        { signal },
      )
      const text = completion.choices?.[0]?.message?.content
      if (typeof text !== 'string' || text.trim() === '') throw new LlmError('invalid_reply', 'the model returned no message content')
      return {
        text,
        model: completion.model ?? this.settings.model,
        usage: { prompt_tokens: completion.usage?.prompt_tokens ?? 0, completion_tokens: completion.usage?.completion_tokens ?? 0 },
      }
    } catch (error) {
      throw classify(error, timeout.aborted)
    }
  }
}

/**
 * The `response_format` for a request: `json_schema` where the endpoint supports it and the request
 * carries a schema, else `json_object` when the request wants JSON (or carries a schema), else none.
 * @example responseFormatFor({ json: true, jsonSchema: { name: 'grades', schema } }, 'json_schema').type // 'json_schema'
 */
export function responseFormatFor(
  request: { json: boolean; jsonSchema?: JsonSchemaFormat | undefined },
  support: 'json_object' | 'json_schema',
): ResponseFormat | undefined {
  const schema = request.jsonSchema
  if (schema && support === 'json_schema') {
    return {
      type: 'json_schema',
      json_schema: { name: schema.name, schema: schema.schema, strict: schema.strict ?? true, ...(schema.description ? { description: schema.description } : {}) },
    }
  }
  return request.json || schema ? { type: 'json_object' } : undefined
}

/** Mirrors the classification in src/llm/openai.ts, so both transports report the same kinds. */
function classify(error: unknown, timedOut: boolean): LlmError {
  if (error instanceof LlmError) return error
  const failure = error as { status?: number; headers?: Headers; name?: string; message?: string }
  if (timedOut || failure.name === 'APIConnectionTimeoutError') return new LlmError('timeout', 'the model did not answer in time')
  const status = failure.status
  if (status === undefined) {
    if (failure.name === 'SyntaxError') return new LlmError('invalid_reply', `the server sent a body that is not JSON: ${failure.message}`)
    return new LlmError('network', `could not reach the model server: ${failure.message ?? String(error)}`)
  }
  const retryAfter = parseRetryAfter(failure.headers?.get?.('retry-after'))
  if (status === 429) return new LlmError('rate_limited', 'the model server is rate limiting (HTTP 429)', retryAfter)
  if (status === 408 || status >= 500) return new LlmError('server_error', `the model server failed (HTTP ${status})`, retryAfter)
  return new LlmError('bad_request', `the model server refused the request (HTTP ${status}): ${failure.message ?? ''}`)
}
