import type { JsonSchemaFormat } from './response-format.ts'

/** One part of a multi-part (vision) message, in the OpenAI chat format. `url` is a `data:` URL or an http(s) URL. */
export type ChatContentPart = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } }

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant'
  /** The message's text. For a multi-part message, the text of its parts (what text-only readers and caches see). */
  content: string
  /**
   * Text and image parts (OpenAI-compatible vision messages). When set, adapters that speak the OpenAI format send
   * these instead of `content`; text-only adapters (the mock) read `content`. Build both with `visionMessage`.
   */
  parts?: ChatContentPart[]
}

/**
 * A multi-part message: `parts` as given, `content` their text parts joined by blank lines. Give each image a text
 * part that names it (handle and digest) so the text alone tells two messages with different images apart.
 * @example visionMessage('user', [{ type: 'text', text: 'Image A-1:' }, { type: 'image_url', image_url: { url:
 *   'data:image/png;base64,iVBO…' } }])
 * // { role: 'user', content: 'Image A-1:', parts: [...] }
 */
export function visionMessage(role: ChatMessage['role'], parts: ChatContentPart[]): ChatMessage {
  const content = parts.flatMap((part) => (part.type === 'text' ? [part.text] : [])).join('\n\n')
  return parts.some((part) => part.type === 'image_url') ? { role, content, parts } : { role, content }
}

/** What the offline mock backend hands a request's own mock reply. */
export interface MockSampling {
  /** The request's sampling seed, when it has one. */
  seed?: number
  /**
   * The mock model's sampling noise (0..1): how often a sampled grade moves one point, like a model at a temperature
   * above 0. Replies that have nothing to sample ignore it.
   */
  noise: number
}

/**
 * The reply text the offline mock backend gives a request. The asking agent builds it from its own structured
 * inputs, so the mock never parses prompt text and this port knows no agent.
 */
export type MockReply = (sampling: MockSampling) => string | { text: string; firstTokenLogprobs: TokenLogprob[] }

export interface ChatRequest {
  /** Who asks (an online agent, a search role, …). Accounting, caches and call logs key on it. */
  role: string
  /**
   * What is asked, in a word the caller owns (`score`, `search_verify`, `library_route`): per-task accounting and
   * test doubles key on it. Never sent to a model.
   */
  task: string
  messages: ChatMessage[]
  /** Ask the server for a JSON object reply when it supports it. */
  json: boolean
  /**
   * The reply's exact JSON schema: sent as `response_format: json_schema` to servers that enforce one (a role's or
   * endpoint's `structured_output: json_schema`), so the reply always parses; other servers get `json_object`.
   */
  jsonSchema?: JsonSchemaFormat
  /** Sampling seed: the same request with another seed is another draw (a repeat), and caches key on it. */
  seed?: number
  /**
   * The most tokens the reply can need, when the caller knows it (a judge: from its rubric count). Sent as
   * `max_tokens` when the role's settings set none; a role's own `max_tokens` wins.
   */
  maxTokens?: number
  /**
   * Ask for the N most likely first tokens of the reply with their log-probabilities (OpenAI's `logprobs` and
   * `top_logprobs`; vLLM and llama.cpp's server answer them too). The reply is read from its first token, so a reply
   * cut after it is whole. A server that sends none leaves `ChatResponse.firstTokenLogprobs` unset.
   */
  firstTokenAlternatives?: number
  signal?: AbortSignal
  /** The reply of the offline mock backend; real backends ignore it. */
  mock?: MockReply
}

interface ChatUsage {
  prompt_tokens: number
  completion_tokens: number
}

/** One candidate token and its natural-log probability. */
export interface TokenLogprob {
  token: string
  logprob: number
}

export interface ChatResponse {
  text: string
  model: string
  usage: ChatUsage
  /** The first reply token's most likely alternatives, when the request asked for them and the server sent them. */
  firstTokenLogprobs?: TokenLogprob[]
  /**
   * Tells the call log that the reader refused this reply (the wrong shape, a copied placeholder): the call counts
   * under `kind`, as a cut reply does, not as `ok`. Set by the call log's wrapper; absent elsewhere.
   */
  refuse?: (kind: LlmError['kind']) => void
}

/** The LLM port. Adapters: mock (heuristic), openai (any OpenAI-compatible server), workers-ai. */
export interface ChatModel {
  /** A stable name of backend + model, part of every cache key. */
  readonly id: string
  complete(request: ChatRequest): Promise<ChatResponse>
}

/**
 * Why an LLM call failed. `context_length`: the prompt does not fit the model's context window (the server said so);
 * no retry can change that.
 */
export type LlmFailure =
  | 'rate_limited'
  | 'server_error'
  | 'timeout'
  | 'network'
  | 'bad_request'
  | 'invalid_reply'
  | 'context_length'

/** What a failure knows beyond its kind. */
export interface LlmErrorDetails {
  /** The reply was cut at this `max_tokens` (`finish_reason: "length"`): a retry needs more room, not the same. */
  cutAtMaxTokens?: number
  /** The model's context window in tokens, as the server named it. */
  contextLimit?: number
  /** What the server said the failed call used (a cut reply's tokens are spent all the same). */
  usage?: ChatUsage
}

/**
 * A failed LLM call, classified so retry policy never has to read message strings.
 * @example throw new LlmError('rate_limited', 'HTTP 429', 2)
 */
export class LlmError extends Error {
  constructor(
    readonly kind: LlmFailure,
    message: string,
    readonly retryAfterSeconds?: number,
    readonly details: LlmErrorDetails = {},
  ) {
    super(message)
    this.name = 'LlmError'
  }

  get retryable(): boolean {
    return this.kind !== 'bad_request' && this.kind !== 'context_length'
  }

  /** The server may heal (busy, down, slow): worth a 503 with Retry-After, unlike a refusal or a bad reply. */
  get transient(): boolean {
    return (
      this.kind === 'rate_limited' || this.kind === 'server_error' || this.kind === 'timeout' || this.kind === 'network'
    )
  }
}
