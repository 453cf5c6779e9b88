import { sendWithinOrigin } from '../llm/redirects.ts'
import { parseRetryAfter } from '../llm/retry.ts'
import { LlmError } from '../llm/types.ts'
import { chunk } from './chunk.ts'
import { readEmbeddings, type Embedder } from './embedder.ts'

export interface OpenAIEmbedderSettings {
  /** Up to and including the version segment, e.g. `https://api.openai.com/v1` or `http://gpu-1:8000/v1`. */
  baseURL: string
  /** Sent as a bearer token when set; local servers usually need none. */
  apiKey?: string
  model: string
  /** The model's vector length; replies of another length are refused. */
  dimensions: number
  /** Ask the server to shorten vectors to `dimensions` (text-embedding-3-*); off for servers that reject the field. */
  requestDimensions?: boolean
  timeoutMs?: number
  /** Texts per request (OpenAI accepts up to 2048). */
  batchSize?: number
}

/**
 * Any OpenAI-compatible `POST /embeddings` (OpenAI, vLLM, Ollama, TEI) with plain `fetch`, so it runs
 * in Workers and Node alike. One batch is one request, with no retries of its own: wrap calls in `withRetry`,
 * which honours the `retryAfterSeconds` of a 429 or 5xx. Failures are `LlmError`s.
 * @example const embedder = new OpenAIEmbedder({ baseURL: 'https://api.openai.com/v1', apiKey: env.OPENAI_API_KEY,
 *   model: 'text-embedding-3-small', dimensions: 1536 })
 */
export class OpenAIEmbedder implements Embedder {
  readonly id: string
  readonly dimensions: number

  constructor(private readonly settings: OpenAIEmbedderSettings) {
    this.dimensions = settings.dimensions
    this.id = `openai:${settings.baseURL}#${settings.model}:${settings.dimensions}`
  }

  async embed(texts: string[]): Promise<Float32Array[]> {
    const vectors: Float32Array[] = []
    for (const batch of chunk(texts, this.settings.batchSize ?? 128)) vectors.push(...(await this.#embedBatch(batch)))
    return vectors
  }

  async #embedBatch(input: string[]): Promise<Float32Array[]> {
    const { baseURL, apiKey, model, dimensions, requestDimensions, timeoutMs = 30_000 } = this.settings
    const timeout = AbortSignal.timeout(timeoutMs)
    let body: string
    try {
      const init = {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}) },
        body: JSON.stringify({ model, input, ...(requestDimensions ? { dimensions } : {}) }),
        signal: timeout,
      }
      const url = `${baseURL.replace(/\/+$/, '')}/embeddings`
      const response = await sendWithinOrigin(fetch, url, init, 'the embeddings server')
      body = await response.text()
      if (!response.ok) throw failureOf(response, body)
    } catch (error) {
      if (error instanceof LlmError) throw error
      if (timeout.aborted) throw new LlmError('timeout', `the embeddings server did not answer within ${timeoutMs} ms`)
      throw new LlmError('network', `could not reach the embeddings server: ${(error as Error).message}`)
    }
    let reply: { data?: { embedding?: unknown; index?: number }[] }
    try {
      reply = JSON.parse(body)
    } catch {
      throw new LlmError('invalid_reply', `the embeddings server sent a body that is not JSON: ${body.slice(0, 120)}`)
    }
    const data = Array.isArray(reply?.data)
      ? [...reply.data].sort((a, b) => (a?.index ?? 0) - (b?.index ?? 0))
      : undefined
    return readEmbeddings(
      data?.map((item) => item?.embedding),
      input.length,
      dimensions,
      'the embeddings server',
    )
  }
}

function failureOf(response: Response, body: string): LlmError {
  const { status } = response
  const retryAfter = parseRetryAfter(response.headers.get('retry-after'))
  if (status === 429)
    return new LlmError('rate_limited', 'the embeddings server is rate limiting (HTTP 429)', retryAfter)
  if (status === 408 || status >= 500)
    return new LlmError('server_error', `the embeddings server failed (HTTP ${status})`, retryAfter)
  return new LlmError(
    'bad_request',
    `the embeddings server refused the request (HTTP ${status}): ${body.slice(0, 300)}`,
  )
}
