/**
 * The endpoint pool of the offline search: several OpenAI-compatible servers (typically vLLM on GPU
 * boxes) behind one `ChatModel`.
 *
 * - **Balancing**: each attempt goes to the healthy endpoint with free capacity and the fewest
 *   outstanding requests; ties go round-robin.
 * - **Cache affinity**: a request with a long shared prompt prefix (a judge prompt: instructions, rubrics, the
 *   group's prompt, before the answer) goes to the endpoint that prefix hashes to, so each vLLM replica keeps its own
 *   groups' prefixes warm; when that endpoint is full, out or cooling, the request is balanced as above.
 * - **Caps**: an endpoint never has more than `max_concurrency` of the pool's requests in flight. When
 *   every endpoint is full, requests wait in one FIFO queue (a retry keeps its original place).
 * - **Health**: `failureThreshold` consecutive network / timeout / 5xx failures, or a failed probe
 *   (`GET {base_url}/models`, at start), take an endpoint out; while out it is probed every
 *   `probeIntervalMs` and put back on the first successful probe.
 * - **Retries** (autosr §8.7, no stacking): one attempt is exactly one HTTP request (SDK retries are
 *   off), at most `maxAttempts` per request. Rate limits, 5xx, timeouts and network errors are
 *   retried with exponential backoff and full jitter, preferring another endpoint. A `Retry-After`
 *   cools the endpoint that sent it for that long (capped at `maxDelayMs`), so the retry goes to
 *   another endpoint at once if one is free, else waits for the cooldown.
 *   `bad_request` is never retried. **`invalid_reply` is not retried by the pool**: the reply
 *   arrived, and whether it is usable is for the caller's parser to decide, so the agent's own retry
 *   loop (`runAgent` / `withRetry`) owns it. Errors the pool has already retried are thrown as
 *   `PoolError`s whose `retryable` is false, so a `withRetry` around the pool does not multiply them.
 * - **Accounting**: `usage()` counts every attempt exactly once, per role and per endpoint.
 */
import { hash32 } from '../../src/hash/index.ts'
import type { OpenAIChatSettings } from '../../src/llm/openai.ts'
import { OpenAIChatModel } from '../../src/llm/openai.ts'
import { retry, retryDelayMs } from '../../src/llm/retry.ts'
import { LlmError, type ChatModel, type ChatRequest, type ChatResponse, type LlmFailure } from '../../src/llm/types.ts'
import { parseEndpoints, type EndpointConfig, type EndpointConfigInput } from './endpoints.ts'
import { nodeHttpFetch } from './http.ts'
import { responseFormatFor } from '../../src/llm/response-format.ts'

/**
 * A `ChatRequest` with the pool's optional extras. Plain `ChatRequest`s are accepted as they are.
 * @example const request: PoolRequest = { ...chat, jsonSchema: { name: 'grades', schema }, seed: 7, account: 'verifier'
 *   }
 */
export interface PoolRequest extends ChatRequest {
  /** The name this call is accounted under in `usage()`; defaults to the request's `role`. */
  account?: string
}

/** A reply, with the endpoint that gave it and how many attempts it took. */
export interface PoolResponse extends ChatResponse {
  endpoint: string
  attempts: number
}

/**
 * The sampling settings every request of the pool is sent with (part of any cache key). Without `max_tokens`, each
 * request's own `maxTokens` holds (what its reply needs, twice that when asked again after a cut reply).
 */
export interface SamplingSettings {
  temperature: number
  max_tokens?: number
  seed?: number
}

export interface EndpointPoolOptions {
  endpoints: readonly EndpointConfigInput[]
  /** The model name for endpoints that do not set their own. */
  model?: string
  temperature?: number
  maxTokens?: number
  /** One attempt's time limit. Default 60 s. */
  timeoutMs?: number
  /** Default sampling seed of every request. */
  seed?: number
  /** Where `api_key_env` names are looked up. Default `process.env`. */
  secrets?: Record<string, string | undefined>
  /** HTTP requests per call, first attempt included. Default 4. */
  maxAttempts?: number
  /** Backoff: attempt n waits U[0, min(maxDelayMs, baseDelayMs·2^(n-1))]. Defaults 250 ms and 8 s. */
  baseDelayMs?: number
  /** Also caps how long a `Retry-After` cools an endpoint. */
  maxDelayMs?: number
  /** Consecutive network / timeout / 5xx failures that take an endpoint out. Default 3. */
  failureThreshold?: number
  /** How often an endpoint that is out is probed. Default 5 s. */
  probeIntervalMs?: number
  /** Default 5 s. */
  probeTimeoutMs?: number
  /** Probe every endpoint when the pool starts (default true). */
  probeAtStart?: boolean
  /** How long requests wait while every endpoint is out before they fail. Default 60 s. */
  unavailableTimeoutMs?: number
  /** Endpoint health changes and retries, for logs. */
  onEvent?: (event: PoolEvent) => void
  /** Backoff sleeps (tests pass a fake). Must reject when `signal` aborts. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>
  /** Jitter source in [0, 1). */
  random?: () => number
}

export type PoolEvent =
  | { type: 'endpoint_out'; endpoint: string; reason: string }
  | { type: 'endpoint_back'; endpoint: string }
  | { type: 'retry'; endpoint: string; account: string; attempt: number; kind: LlmFailure; delay_ms: number }

export type FailureKind = LlmFailure | 'aborted'

/**
 * Counts over attempts (HTTP requests). `calls == ok + Σ failures`; `retries` are the attempts after a request's first.
 */
interface CallCounters {
  calls: number
  ok: number
  failures: Partial<Record<FailureKind, number>>
  retries: number
  prompt_tokens: number
  completion_tokens: number
  /** Summed duration of the attempts (queueing and backoff excluded). */
  wall_ms: number
}

export interface RoleUsage extends CallCounters {
  /** `complete()` calls. */
  requests: number
  /** Requests that ended in an error. */
  gave_up: number
}

export interface EndpointUsage extends CallCounters {
  base_url: string
  model: string
  max_concurrency: number
  healthy: boolean
  outstanding: number
  peak_outstanding: number
  taken_out: number
  restored: number
  probes: number
  probe_failures: number
  last_error?: string
}

export interface PoolUsage {
  /** Keyed by `account ?? role`. */
  roles: Record<string, RoleUsage>
  /** Keyed by endpoint name (`name`, else `base_url`). */
  endpoints: Record<string, EndpointUsage>
  total: RoleUsage
  /** Requests waiting for an endpoint right now. */
  queued: number
}

/**
 * A failure the pool has already retried (or must not retry): `retryable` is false so an outer
 * `withRetry` does not stack retries on top. `kind` is the last attempt's failure.
 * @example if (error instanceof PoolError) console.log(error.kind, error.attempts)
 */
export class PoolError extends LlmError {
  constructor(
    kind: LlmFailure,
    message: string,
    readonly attempts: number,
    retryAfterSeconds?: number,
  ) {
    super(kind, message, retryAfterSeconds)
    this.name = 'PoolError'
  }

  override get retryable(): boolean {
    return false
  }
}

/** A failed attempt the pool retries after `delayMs`, possibly on another endpoint. */
class PoolRetry extends Error {
  constructor(
    readonly failure: LlmError,
    readonly delayMs: number,
  ) {
    super(failure.message)
  }
}

/** Failure kinds the pool retries itself; the others go straight to the caller. */
const RETRIED: ReadonlySet<LlmFailure> = new Set(['rate_limited', 'server_error', 'timeout', 'network'])
/** Failure kinds that count against an endpoint's health. */
const UNHEALTHY: ReadonlySet<LlmFailure> = new Set(['server_error', 'timeout', 'network'])

interface Endpoint {
  readonly config: EndpointConfig
  readonly name: string
  readonly settings: OpenAIChatSettings
  readonly transport: OpenAIChatModel
  outstanding: number
  healthy: boolean
  consecutiveFailures: number
  /** No attempt goes here before this time (ms since epoch): a Retry-After. */
  coolUntil: number
  probeTimer: ReturnType<typeof setTimeout> | undefined
  readonly usage: EndpointUsage
}

interface Waiter {
  readonly seq: number
  readonly avoid: Endpoint | undefined
  /** The hash of the request's shared prompt prefix, when it has a long one (see `affinityOf`). */
  readonly affinity: number | undefined
  resolve(endpoint: Endpoint): void
  reject(error: unknown): void
}

/**
 * Several OpenAI-compatible endpoints behind one `ChatModel`: least-outstanding balancing, hard
 * per-endpoint caps with a FIFO queue, health probes, bounded retries without stacking, and usage
 * accounting per role and per endpoint. Call `close()` when done (it stops the probe timers).
 * @example
 * const pool = new EndpointPool({ endpoints: await loadEndpointsFile('endpoints.json'), model: 'Qwen/Qwen3-8B' })
 * const reply = await pool.complete({ role: 'scorer', messages, task, json: true })
 * console.table(pool.usage().endpoints)
 * await pool.close()
 */
export class EndpointPool implements ChatModel {
  readonly id: string
  readonly sampling: SamplingSettings
  readonly #endpoints: Endpoint[]
  readonly #queue: Waiter[] = []
  readonly #roles = new Map<string, RoleUsage>()
  readonly #maxAttempts: number
  readonly #baseDelayMs: number
  readonly #maxDelayMs: number
  readonly #failureThreshold: number
  readonly #probeIntervalMs: number
  readonly #probeTimeoutMs: number
  readonly #unavailableTimeoutMs: number
  readonly #onEvent: ((event: PoolEvent) => void) | undefined
  readonly #sleep: ((ms: number, signal?: AbortSignal) => Promise<void>) | undefined
  readonly #random: () => number
  readonly #ready: Promise<void>
  #cursor = 0
  #seq = 0
  #closed = false
  #wakeTimer: ReturnType<typeof setTimeout> | undefined
  #wakeAt = Infinity
  #allOutSince: number | undefined
  #allOutTimer: ReturnType<typeof setTimeout> | undefined

  constructor(options: EndpointPoolOptions) {
    const configs = parseEndpoints([...options.endpoints], 'EndpointPool endpoints')
    const secrets = options.secrets ?? process.env
    const timeoutMs = options.timeoutMs ?? 60_000
    this.sampling = {
      temperature: options.temperature ?? 0,
      ...(options.maxTokens === undefined ? {} : { max_tokens: options.maxTokens }),
      ...(options.seed === undefined ? {} : { seed: options.seed }),
    }
    this.#endpoints = configs.map((config): Endpoint => {
      const model = config.model ?? options.model
      if (!model)
        throw new LlmError(
          'bad_request',
          `endpoint ${config.base_url} has no model: set its "model" or the pool's model`,
        )
      const apiKey = config.api_key_env ? secrets[config.api_key_env] : 'not-needed'
      if (typeof apiKey !== 'string' || apiKey === '') {
        throw new LlmError(
          'bad_request',
          `the environment variable ${config.api_key_env} named by api_key_env of ${config.base_url} is not set`,
        )
      }
      const settings: OpenAIChatSettings = {
        baseURL: config.base_url,
        apiKey,
        model,
        temperature: this.sampling.temperature,
        ...(this.sampling.max_tokens === undefined ? {} : { maxTokens: this.sampling.max_tokens }),
        timeoutMs,
        fetch: nodeHttpFetch,
        ...(this.sampling.seed === undefined ? {} : { seed: this.sampling.seed }),
      }
      return {
        config,
        name: config.name ?? config.base_url,
        settings,
        transport: new OpenAIChatModel(settings),
        outstanding: 0,
        healthy: true,
        consecutiveFailures: 0,
        coolUntil: 0,
        probeTimer: undefined,
        usage: {
          ...emptyCounters(),
          base_url: config.base_url,
          model,
          max_concurrency: config.max_concurrency,
          healthy: true,
          outstanding: 0,
          peak_outstanding: 0,
          taken_out: 0,
          restored: 0,
          probes: 0,
          probe_failures: 0,
        },
      }
    })
    this.id = `pool:${[...new Set(this.#endpoints.map((endpoint) => endpoint.settings.model))].sort().join('+')}`
    this.#maxAttempts = Math.max(1, options.maxAttempts ?? 4)
    this.#baseDelayMs = options.baseDelayMs ?? 250
    this.#maxDelayMs = options.maxDelayMs ?? 8_000
    this.#failureThreshold = Math.max(1, options.failureThreshold ?? 3)
    this.#probeIntervalMs = options.probeIntervalMs ?? 5_000
    this.#probeTimeoutMs = options.probeTimeoutMs ?? 5_000
    this.#unavailableTimeoutMs = options.unavailableTimeoutMs ?? 60_000
    this.#onEvent = options.onEvent
    this.#sleep = options.sleep
    this.#random = options.random ?? Math.random
    this.#ready =
      options.probeAtStart === false
        ? Promise.resolve()
        : Promise.all(
            this.#endpoints.map(async (endpoint) => {
              const failure = await this.#probe(endpoint)
              if (failure !== undefined && !this.#closed) this.#takeOut(endpoint, `probe failed: ${failure}`)
            }),
          ).then(() => undefined)
  }

  /**
   * Resolves when the start probes are done (endpoints that failed them are out and being re-probed).
   * @example await pool.ready(); console.log(pool.usage().endpoints)
   */
  ready(): Promise<void> {
    return this.#ready
  }

  /**
   * Sends one chat request through the pool, retrying transport failures on the same or another endpoint.
   * Accepts a `PoolRequest` (JSON schema, seed, accounting name). Rejects with the caller's abort
   * reason when `request.signal` aborts, with the `invalid_reply` / `bad_request` `LlmError` as it
   * came, or with a non-retryable `PoolError` once the attempts are spent.
   * @example const { text, endpoint, attempts } = await pool.complete({ role: 'scorer', messages, task, json: true,
   *   seed: 1 } as PoolRequest)
   */
  async complete(request: ChatRequest): Promise<PoolResponse> {
    const poolRequest = request as PoolRequest
    const account = poolRequest.account ?? poolRequest.role
    const role = this.#role(account)
    role.requests++
    const seq = this.#seq++
    const affinity = affinityOf(poolRequest)
    let avoid: Endpoint | undefined
    const send = async (attempt: number): Promise<PoolResponse> => {
      const endpoint = await this.#acquire(seq, avoid, affinity, poolRequest.signal)
      const started = performance.now()
      let reply: ChatResponse | undefined
      let failure: LlmError | undefined
      try {
        reply = await this.#send(endpoint, poolRequest)
      } catch (error) {
        failure =
          error instanceof LlmError ? error : new LlmError('network', String((error as Error)?.message ?? error))
      }
      const elapsed = performance.now() - started
      if (reply) {
        this.#count(role, endpoint, attempt, 'ok', elapsed, reply.usage)
        endpoint.consecutiveFailures = 0
        this.#release(endpoint)
        return { ...reply, endpoint: endpoint.name, attempts: attempt }
      }
      avoid = endpoint
      return this.#settleFailure(role, endpoint, attempt, elapsed, failure, poolRequest.signal)
    }
    try {
      return await retry(
        send,
        (error) =>
          error instanceof PoolRetry
            ? { error: error.failure, retryable: true, delayMs: error.delayMs }
            : { error, retryable: false },
        {
          maxAttempts: this.#maxAttempts,
          ...(this.#sleep ? { sleep: this.#sleep } : {}),
          ...(poolRequest.signal ? { signal: poolRequest.signal } : {}),
          onRetry: (failure, attempt, delayMs) =>
            this.#onEvent?.({
              type: 'retry',
              endpoint: avoid?.name ?? '',
              account,
              attempt,
              kind: (failure as LlmError).kind,
              delay_ms: delayMs,
            }),
        },
      )
    } catch (error) {
      role.gave_up++
      throw error
    }
  }

  /** Counts a failed attempt, takes a failing endpoint out, and throws what the retry loop should see. */
  #settleFailure(
    role: RoleUsage,
    endpoint: Endpoint,
    attempt: number,
    elapsed: number,
    caught: LlmError | undefined,
    signal: AbortSignal | undefined,
  ): never {
    const failure = caught ?? new LlmError('network', 'unknown failure')
    if (signal?.aborted) {
      this.#count(role, endpoint, attempt, 'aborted', elapsed)
      this.#release(endpoint)
      throw signal.reason ?? failure
    }
    this.#count(role, endpoint, attempt, failure.kind, elapsed)
    endpoint.usage.last_error = failure.message
    if (UNHEALTHY.has(failure.kind) && ++endpoint.consecutiveFailures >= this.#failureThreshold) {
      this.#takeOut(endpoint, `${endpoint.consecutiveFailures} consecutive failures, the last: ${failure.message}`)
    }
    if (!RETRIED.has(failure.kind)) {
      this.#release(endpoint)
      throw failure
    }
    if (attempt >= this.#maxAttempts || this.#closed) {
      this.#release(endpoint)
      throw new PoolError(
        failure.kind,
        `${failure.message} (gave up after ${attempt} attempt${attempt === 1 ? '' : 's'})`,
        attempt,
        failure.retryAfterSeconds,
      )
    }
    const delayMs = this.#retryDelay(endpoint, failure, attempt)
    this.#release(endpoint)
    throw new PoolRetry(failure, delayMs)
  }

  /**
   * A snapshot of the pool's accounting: per role (`account ?? role`), per endpoint and in total.
   * Every attempt is counted exactly once: `calls == ok + Σ failures` in every view, and the
   * endpoints' `calls` add up to the HTTP requests the servers received.
   * @example const { total, endpoints } = pool.usage(); console.log(total.calls,
   *   endpoints['http://gpu-1:8000/v1']?.healthy)
   */
  usage(): PoolUsage {
    const roles = Object.fromEntries([...this.#roles].map(([name, counters]) => [name, cloneCounters(counters)]))
    const total: RoleUsage = { ...emptyCounters(), requests: 0, gave_up: 0 }
    for (const counters of this.#roles.values()) {
      addCounters(total, counters)
      total.requests += counters.requests
      total.gave_up += counters.gave_up
    }
    const endpoints = Object.fromEntries(
      this.#endpoints.map((endpoint) => [
        endpoint.name,
        { ...cloneCounters(endpoint.usage), healthy: endpoint.healthy, outstanding: endpoint.outstanding },
      ]),
    )
    return { roles, endpoints, total, queued: this.#queue.length }
  }

  /**
   * Stops probing and fails the requests still waiting for an endpoint; requests in flight finish.
   * @example await pool.close()
   */
  async close(): Promise<void> {
    this.#closed = true
    for (const endpoint of this.#endpoints) clearTimeout(endpoint.probeTimer)
    clearTimeout(this.#wakeTimer)
    clearTimeout(this.#allOutTimer)
    const waiting = this.#queue.splice(0)
    for (const waiter of waiting) waiter.reject(new PoolError('network', 'the endpoint pool is closed', 0))
    await this.#ready.catch(() => undefined)
  }

  // -------------------------------------------------------------------------------------------
  // Scheduling

  /** Waits for an endpoint slot in FIFO order of the requests' first arrival. */
  #acquire(
    seq: number,
    avoid: Endpoint | undefined,
    affinity: number | undefined,
    signal: AbortSignal | undefined,
  ): Promise<Endpoint> {
    if (this.#closed) return Promise.reject(new PoolError('network', 'the endpoint pool is closed', 0))
    if (signal?.aborted) return Promise.reject(signal.reason)
    if (this.#allOutSince !== undefined && Date.now() - this.#allOutSince >= this.#unavailableTimeoutMs) {
      return Promise.reject(this.#unavailableError())
    }
    return new Promise<Endpoint>((resolve, reject) => {
      const onAbort = () => {
        const index = this.#queue.indexOf(waiter)
        if (index >= 0) this.#queue.splice(index, 1)
        reject(signal?.reason)
      }
      const waiter: Waiter = {
        seq,
        avoid,
        affinity,
        resolve: (endpoint) => {
          signal?.removeEventListener('abort', onAbort)
          resolve(endpoint)
        },
        reject: (error) => {
          signal?.removeEventListener('abort', onAbort)
          reject(error)
        },
      }
      signal?.addEventListener('abort', onAbort, { once: true })
      // Keep the queue ordered by first arrival: a retry goes before requests that came after it.
      let index = this.#queue.length
      while (index > 0 && this.#queue[index - 1]!.seq > seq) index--
      this.#queue.splice(index, 0, waiter)
      this.#dispatch()
    })
  }

  /** Hands free slots to waiting requests, head of the queue first. */
  #dispatch(): void {
    while (this.#queue.length > 0) {
      const head = this.#queue[0]!
      const endpoint = this.#preferred(head) ?? this.#pick(head.avoid)
      if (!endpoint) break
      const waiter = this.#queue.shift()!
      endpoint.outstanding++
      endpoint.usage.peak_outstanding = Math.max(endpoint.usage.peak_outstanding, endpoint.outstanding)
      waiter.resolve(endpoint)
    }
    if (this.#queue.length > 0) this.#wakeAfterCooldown()
  }

  /**
   * The healthy, not cooling endpoint with free capacity and the fewest outstanding requests; ties
   * go to the first in round-robin order. `avoid` (the endpoint a retry failed on) is taken only
   * when no other endpoint has a free slot.
   */
  #pick(avoid: Endpoint | undefined): Endpoint | undefined {
    const now = Date.now()
    const count = this.#endpoints.length
    let best: Endpoint | undefined
    let bestIndex = -1
    let fallback: Endpoint | undefined
    let fallbackIndex = -1
    for (let step = 0; step < count; step++) {
      const index = (this.#cursor + step) % count
      const endpoint = this.#endpoints[index]!
      if (!endpoint.healthy || endpoint.coolUntil > now || endpoint.outstanding >= endpoint.config.max_concurrency)
        continue
      if (endpoint === avoid) {
        fallback = endpoint
        fallbackIndex = index
      } else if (!best || endpoint.outstanding < best.outstanding) {
        best = endpoint
        bestIndex = index
      }
    }
    const chosen = best ?? fallback
    if (chosen) this.#cursor = ((best ? bestIndex : fallbackIndex) + 1) % count
    return chosen
  }

  /**
   * The endpoint a request with a long shared prefix belongs to — the one whose inference server already holds that
   * prefix's KV cache — by rendezvous hashing (the same prefix always ranks the endpoints the same way, and an endpoint
   * added or lost moves only its own share), when it can take the request now; else undefined and `#pick` balances.
   */
  #preferred(waiter: Waiter): Endpoint | undefined {
    if (waiter.affinity === undefined || this.#endpoints.length < 2) return undefined
    let best: Endpoint | undefined
    let bestRank = -1
    for (const endpoint of this.#endpoints) {
      const rank = hash32(endpoint.name, waiter.affinity)
      if (rank > bestRank) {
        best = endpoint
        bestRank = rank
      }
    }
    const usable =
      best &&
      best !== waiter.avoid &&
      best.healthy &&
      best.coolUntil <= Date.now() &&
      best.outstanding < best.config.max_concurrency
    return usable ? best : undefined
  }

  #release(endpoint: Endpoint): void {
    endpoint.outstanding--
    this.#dispatch()
  }

  /** When requests wait only because endpoints are cooling down, dispatch again when the first cooldown ends. */
  #wakeAfterCooldown(): void {
    const now = Date.now()
    let next = Infinity
    for (const endpoint of this.#endpoints) {
      if (endpoint.healthy && endpoint.coolUntil > now && endpoint.outstanding < endpoint.config.max_concurrency)
        next = Math.min(next, endpoint.coolUntil)
    }
    if (next === Infinity || next >= this.#wakeAt) return
    clearTimeout(this.#wakeTimer)
    this.#wakeAt = next
    this.#wakeTimer = setTimeout(() => {
      this.#wakeAt = Infinity
      this.#wakeTimer = undefined
      if (!this.#closed) this.#dispatch()
    }, next - now)
  }

  #retryDelay(endpoint: Endpoint, failure: LlmError, attempt: number): number {
    if (failure.retryAfterSeconds !== undefined) {
      // The server named its own wait: honour it on that endpoint; the retry may go elsewhere at once.
      const waitMs = Math.min(this.#maxDelayMs, failure.retryAfterSeconds * 1_000)
      endpoint.coolUntil = Math.max(endpoint.coolUntil, Date.now() + waitMs)
      return 0
    }
    return retryDelayMs(attempt, { baseDelayMs: this.#baseDelayMs, maxDelayMs: this.#maxDelayMs, random: this.#random })
  }

  // -------------------------------------------------------------------------------------------
  // Transport and health

  #send(endpoint: Endpoint, request: PoolRequest): Promise<ChatResponse> {
    const responseFormat = responseFormatFor(request, endpoint.config.structured_output)
    return endpoint.transport.complete(request, {
      ...(responseFormat ? { responseFormat } : {}),
      ...(request.seed === undefined ? {} : { seed: request.seed }),
    })
  }

  /** `GET {base_url}/models`; the failure's description, or undefined when the endpoint answered 2xx. */
  async #probe(endpoint: Endpoint): Promise<string | undefined> {
    endpoint.usage.probes++
    try {
      const response = await nodeHttpFetch(`${endpoint.config.base_url.replace(/\/+$/, '')}/models`, {
        headers: { authorization: `Bearer ${endpoint.settings.apiKey}` },
        signal: AbortSignal.timeout(this.#probeTimeoutMs),
      })
      if (!response.ok) throw new Error(`HTTP ${response.status}`)
      return undefined
    } catch (error) {
      endpoint.usage.probe_failures++
      const reason =
        (error as Error)?.name === 'TimeoutError' ? 'no answer in time' : String((error as Error)?.message ?? error)
      endpoint.usage.last_error = `probe: ${reason}`
      return reason
    }
  }

  #takeOut(endpoint: Endpoint, reason: string): void {
    if (!endpoint.healthy) return
    endpoint.healthy = false
    endpoint.usage.taken_out++
    this.#onEvent?.({ type: 'endpoint_out', endpoint: endpoint.name, reason })
    this.#scheduleProbe(endpoint)
    if (this.#allOutSince === undefined && this.#endpoints.every((candidate) => !candidate.healthy)) {
      this.#allOutSince = Date.now()
      this.#allOutTimer = setTimeout(() => {
        this.#allOutTimer = undefined
        if (this.#allOutSince === undefined) return
        const error = this.#unavailableError()
        for (const waiter of this.#queue.splice(0)) waiter.reject(error)
      }, this.#unavailableTimeoutMs)
    }
  }

  #putBack(endpoint: Endpoint): void {
    if (endpoint.healthy) return
    endpoint.healthy = true
    endpoint.consecutiveFailures = 0
    endpoint.usage.restored++
    this.#allOutSince = undefined
    clearTimeout(this.#allOutTimer)
    this.#allOutTimer = undefined
    this.#onEvent?.({ type: 'endpoint_back', endpoint: endpoint.name })
    this.#dispatch()
  }

  /**
   * Probes an endpoint that is out every `probeIntervalMs` until it answers. The timer does not keep the process alive.
   */
  #scheduleProbe(endpoint: Endpoint): void {
    if (this.#closed) return
    clearTimeout(endpoint.probeTimer)
    endpoint.probeTimer = setTimeout(async () => {
      endpoint.probeTimer = undefined
      if (this.#closed || endpoint.healthy) return
      const failure = await this.#probe(endpoint)
      if (this.#closed) return
      if (failure === undefined) this.#putBack(endpoint)
      else this.#scheduleProbe(endpoint)
    }, this.#probeIntervalMs)
    endpoint.probeTimer.unref?.()
  }

  #unavailableError(): PoolError {
    const reasons = this.#endpoints
      .map((endpoint) => `${endpoint.name}: ${endpoint.usage.last_error ?? 'out'}`)
      .join('; ')
    return new PoolError(
      'network',
      `no healthy endpoint for ${Math.round(this.#unavailableTimeoutMs / 1_000)} s (${reasons})`,
      0,
    )
  }

  // -------------------------------------------------------------------------------------------
  // Accounting

  #role(account: string): RoleUsage {
    let counters = this.#roles.get(account)
    if (!counters) this.#roles.set(account, (counters = { ...emptyCounters(), requests: 0, gave_up: 0 }))
    return counters
  }

  #count(
    role: RoleUsage,
    endpoint: Endpoint,
    attempt: number,
    outcome: 'ok' | FailureKind,
    elapsedMs: number,
    usage?: ChatResponse['usage'],
  ): void {
    for (const counters of [role, endpoint.usage] as CallCounters[]) {
      counters.calls++
      if (outcome === 'ok') counters.ok++
      else counters.failures[outcome] = (counters.failures[outcome] ?? 0) + 1
      if (attempt > 1) counters.retries++
      counters.prompt_tokens += usage?.prompt_tokens ?? 0
      counters.completion_tokens += usage?.completion_tokens ?? 0
      counters.wall_ms += elapsedMs
    }
  }
}

function emptyCounters(): CallCounters {
  return { calls: 0, ok: 0, failures: {}, retries: 0, prompt_tokens: 0, completion_tokens: 0, wall_ms: 0 }
}

function cloneCounters<T extends CallCounters>(counters: T): T {
  return { ...counters, failures: { ...counters.failures }, wall_ms: Math.round(counters.wall_ms) }
}

function addCounters(into: CallCounters, from: CallCounters): void {
  into.calls += from.calls
  into.ok += from.ok
  into.retries += from.retries
  into.prompt_tokens += from.prompt_tokens
  into.completion_tokens += from.completion_tokens
  into.wall_ms += Math.round(from.wall_ms)
  for (const [kind, count] of Object.entries(from.failures) as [FailureKind, number][])
    into.failures[kind] = (into.failures[kind] ?? 0) + count
}

/** A shared prompt prefix shorter than this is cheap to prefill anywhere: such requests are balanced freely. */
const AFFINITY_MIN_CHARS = 1_024

/**
 * The hash of the prompt prefix a request shares with others of its group: every message but the last, and the last
 * up to the line that introduces its last data block (where a judge prompt's answer starts); undefined when the
 * request has no data block or the prefix is short.
 * @example affinityOf(scorerRequest) === affinityOf(scorerRequestForAnotherAnswerOfTheGroup) // true
 * @internal
 */
export function affinityOf(request: ChatRequest): number | undefined {
  const last = request.messages.at(-1)
  if (!last) return undefined
  const opening = last.content.lastIndexOf('<<<DATA-')
  if (opening < 0) return undefined
  const cut = last.content.lastIndexOf('\n', opening - 2) + 1
  const prefix = [...request.messages.slice(0, -1).map((message) => message.content), last.content.slice(0, cut)]
  const text = prefix.join('\u0000')
  return text.length < AFFINITY_MIN_CHARS ? undefined : hash32(text)
}
