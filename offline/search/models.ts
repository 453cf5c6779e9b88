/**
 * The reply cache and the per-role accounting between the search roles and the backend:
 *
 *   role (runAgent) → RoleModel → CachedChatModel (persistent, single-flight) → CountingModel → backend model
 *
 * - Every verifier/judge/proposer/initializer answer is cached by content (messages, role, model, sampling and the
 *   request's seed) in `<cache dir>/<model>/llm-cache.sqlite`, so a question asked again — later in the run, by a
 *   resumed run, or by a rerun — costs no call.
 * - Requests carry their role's seed (`seed`) as the sampling seed: two proposals that differ only by seed are
 *   different questions (and get different answers from a sampling model).
 * - A reply the role's parser refuses (`runAgent` calls the response's `refuse`) is counted and evicted from the
 *   cache, so no later run is served it; a request object sent again after an unusable reply evicts it too.
 * - Counted per role: requests, cache hits, backend calls (misses that reached the model), failures, retries after
 *   unusable replies, and the tokens of real calls (cached answers cost none).
 */
import { createHash } from 'node:crypto'
import { join } from 'node:path'
import { abortScope } from '../../src/llm/abort.ts'
import type { ChatModel, ChatRequest, ChatResponse } from '../../src/llm/types.ts'
import type { SearchRoleName } from '../../src/search/roles/rubric.ts'
import { CachedChatModel, type CacheStats, type PoolRequest, type SamplingSettings } from '../llm/index.ts'
import { SEARCH_ROLES } from './roles.ts'

/** One role's accounting. `requests = cache_hits + calls + joined` (joined: shared an identical call in flight). */
export interface RoleCounters {
  /** Requests the role made. */
  requests: number
  /** Answered from the reply cache. */
  cache_hits: number
  /** Sent to the backend (cache misses); on openai each may take several HTTP attempts. */
  calls: number
  /** Backend calls that failed. */
  failed_calls: number
  /** Replies the role could not use (each evicted from the cache), each asked again while attempts last. */
  invalid_replies: number
  prompt_tokens: number
  completion_tokens: number
}

export interface ModelsUsage {
  roles: Record<SearchRoleName, RoleCounters>
  total: RoleCounters
  /** Reply-cache counters summed over the per-model caches; null with `--no-cache`. */
  cache: (CacheStats & { dirs: string[] }) | null
}

const emptyCounters = (): RoleCounters => ({
  requests: 0,
  cache_hits: 0,
  calls: 0,
  failed_calls: 0,
  invalid_replies: 0,
  prompt_tokens: 0,
  completion_tokens: 0,
})

/**
 * The directory of one model's cache inside the cache root: a readable slug of the model id and a short hash.
 * @example cacheDirFor('out/cache', 'mock:mock-heuristic-1') // 'out/cache/mock_mock-heuristic-1-5d41402a'
 */
function cacheDirFor(root: string, modelId: string): string {
  const slug = modelId.replace(/[^A-Za-z0-9._-]+/g, '_').slice(0, 80)
  return join(root, `${slug}-${createHash('sha256').update(modelId).digest('hex').slice(0, 8)}`)
}

/**
 * The search roles' models behind the reply cache, with per-role accounting. Open with `SearchModels.open`, hand
 * `forRole(role)` to `createSearchRoles({ modelsByRole })`, read `usage()`, `close()` when done.
 * @example
 * const models = await SearchModels.open({ models: backend.models, cacheDir: 'out/cache' })
 * const roles = createSearchRoles({ backend: 'mock', dataset, modelsByRole: models.byRole() })
 * // … runSearch …
 * console.log(models.usage().roles.verifier) // { requests, cache_hits, calls, … }
 * await models.close()
 */
export class SearchModels {
  readonly #roles: Record<SearchRoleName, RoleModel>
  readonly #caches: CachedChatModel[]
  readonly #counters: Record<SearchRoleName, RoleCounters>
  readonly #counting: CountingModel[]

  private constructor(
    roles: Record<SearchRoleName, RoleModel>,
    caches: CachedChatModel[],
    counters: Record<SearchRoleName, RoleCounters>,
    counting: CountingModel[],
  ) {
    this.#roles = roles
    this.#caches = caches
    this.#counters = counters
    this.#counting = counting
  }

  /**
   * Wraps each role's backend model: one cache (and one counting layer) per distinct model, shared by the roles
   * using it. `cacheDir` null disables the cache. `onCall` sees every backend call as it starts (with the total).
   * @example const models = await SearchModels.open({ models: backend.models, cacheDir: null })
   */
  static async open(options: {
    models: Record<SearchRoleName, ChatModel>
    cacheDir: string | null
    /**
     * The run's signal: aborting it cancels the backend calls in flight (shared cache calls carry no caller's signal).
     */
    signal?: AbortSignal
    onCall?: (total: number) => void
  }): Promise<SearchModels> {
    const counters = Object.fromEntries(SEARCH_ROLES.map((role) => [role, emptyCounters()])) as Record<
      SearchRoleName,
      RoleCounters
    >
    const calls = { total: 0 }
    const layers = new Map<ChatModel, { counting: CountingModel; cache: CachedChatModel | null }>()
    const caches: CachedChatModel[] = []
    const counting: CountingModel[] = []
    try {
      for (const model of new Set(Object.values(options.models))) {
        const counter = new CountingModel(model, counters, () => options.onCall?.(++calls.total), options.signal)
        counting.push(counter)
        let cache: CachedChatModel | null = null
        if (options.cacheDir !== null) {
          const sampling = (model as { sampling?: SamplingSettings }).sampling
          cache = await CachedChatModel.open({
            dir: cacheDirFor(options.cacheDir, model.id),
            model: counter,
            ...(sampling ? { sampling } : {}),
          })
          caches.push(cache)
        }
        layers.set(model, { counting: counter, cache })
      }
    } catch (error) {
      await Promise.all(caches.map((cache) => cache.close().catch(() => undefined)))
      throw error
    }
    const roles = Object.fromEntries(
      SEARCH_ROLES.map((role) => {
        const layer = layers.get(options.models[role])!
        return [role, new RoleModel(role, layer.cache ?? layer.counting, layer.cache, counters[role])]
      }),
    ) as Record<SearchRoleName, RoleModel>
    return new SearchModels(roles, caches, counters, counting)
  }

  /**
   * The model to give a role (its requests are cached and counted under `role`).
   * @example createSearchRoles({ backend: 'mock', dataset, modelsByRole: { verifier: models.forRole('verifier') } })
   */
  forRole(role: SearchRoleName): ChatModel {
    return this.#roles[role]
  }

  /**
   * Every role's model, for `createSearchRoles({ modelsByRole })`.
   * @example createSearchRoles({ backend: 'llm', dataset, modelsByRole: models.byRole() })
   */
  byRole(): Record<SearchRoleName, ChatModel> {
    return { ...this.#roles }
  }

  /**
   * Per-role counters, their total, and the cache's counters.
   * @example models.usage().total.calls // backend calls of this process
   */
  usage(): ModelsUsage {
    const roles = Object.fromEntries(SEARCH_ROLES.map((role) => [role, { ...this.#counters[role] }])) as Record<
      SearchRoleName,
      RoleCounters
    >
    const total = emptyCounters()
    for (const counters of Object.values(roles))
      for (const key of Object.keys(total) as (keyof RoleCounters)[]) total[key] += counters[key]
    let cache: ModelsUsage['cache'] = null
    if (this.#caches.length > 0) {
      const sum: CacheStats = {
        hits: 0,
        misses: 0,
        joins: 0,
        entries: 0,
        forgotten: 0,
        loaded: 0,
        pending_writes: 0,
      }
      for (const stats of this.#caches.map((entry) => entry.stats()))
        for (const key of Object.keys(sum) as (keyof CacheStats)[]) sum[key] += stats[key]
      cache = { ...sum, dirs: this.#caches.map((entry) => entry.file.replace(/[/\\][^/\\]+$/, '')) }
    }
    return { roles, total, cache }
  }

  /**
   * Backend calls in flight right now.
   * @example if (models.inFlight() > 0) await models.settle(2000)
   */
  inFlight(): number {
    return this.#counting.reduce((sum, layer) => sum + layer.inFlight, 0)
  }

  /**
   * Waits until no backend call is in flight, at most `timeoutMs`: after an interruption, answers already paid
   * for still reach the cache.
   * @example await models.settle(2_000)
   */
  async settle(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs
    while (this.inFlight() > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10))
  }

  /**
   * Writes pending cache lines to disk (fsync'd).
   * @example await models.flush()
   */
  async flush(): Promise<void> {
    await Promise.all(this.#caches.map((cache) => cache.flush()))
  }

  /**
   * Flushes and closes the caches.
   * @example await models.close()
   */
  async close(): Promise<void> {
    await Promise.all(this.#caches.map((cache) => cache.close()))
  }
}

/** The request a role's request becomes: its own role; the role's seed is already its sampling seed. */
function prepare(request: ChatRequest, role: SearchRoleName): PoolRequest {
  return { ...request, role }
}

/** One role's view of the cached model: seeds, eviction of replies its parser refused, counters. */
class RoleModel implements ChatModel {
  readonly id: string
  readonly #prepared = new WeakMap<ChatRequest, PoolRequest>()
  readonly #answered = new WeakMap<ChatRequest, string>()

  constructor(
    readonly role: SearchRoleName,
    private readonly model: ChatModel,
    private readonly cache: CachedChatModel | null,
    private readonly counters: RoleCounters,
  ) {
    this.id = model.id
  }

  /**
   * Answers from the cache (or the backend); a repeated request object first evicts the reply it got before.
   * @example await models.forRole('verifier').complete(request)
   */
  async complete(request: ChatRequest): Promise<ChatResponse> {
    this.counters.requests++
    let prepared = this.#prepared.get(request)
    if (!prepared) this.#prepared.set(request, (prepared = prepare(request, this.role)))
    const previous = this.#answered.get(request)
    if (previous !== undefined) {
      // The same request object again: its caller could not use the last reply (runAgent's retry).
      this.counters.invalid_replies++
      this.cache?.forget(prepared, { text: previous })
    }
    const reply = await this.model.complete(prepared)
    if ((reply as { cached?: boolean }).cached) this.counters.cache_hits++
    this.#answered.set(request, reply.text)
    return {
      ...reply,
      refuse: (kind) => {
        reply.refuse?.(kind)
        if (kind !== 'invalid_reply' || this.#answered.get(request) !== reply.text) return
        this.#answered.delete(request)
        this.counters.invalid_replies++
        this.cache?.forget(prepared, { text: reply.text })
      },
    }
  }
}

/** Counts the calls that reach the backend, per role, and how many are in flight. */
class CountingModel implements ChatModel {
  readonly id: string
  inFlight = 0

  constructor(
    private readonly model: ChatModel,
    private readonly counters: Record<SearchRoleName, RoleCounters>,
    private readonly onCall: () => void,
    private readonly signal?: AbortSignal,
  ) {
    this.id = model.id
  }

  /**
   * One backend call, counted under the request's role, cancelled with the run.
   * @example await counting.complete(request) // counters.verifier.calls + 1
   */
  async complete(request: ChatRequest): Promise<ChatResponse> {
    const counters = this.counters[request.role as SearchRoleName]
    if (counters) counters.calls++
    this.inFlight++
    try {
      this.onCall()
      const reply = await this.#completeCancelledWithRun(request)
      if (counters) {
        counters.prompt_tokens += reply.usage.prompt_tokens
        counters.completion_tokens += reply.usage.completion_tokens
      }
      return reply
    } catch (error) {
      if (counters) counters.failed_calls++
      throw error
    } finally {
      this.inFlight--
    }
  }

  async #completeCancelledWithRun(request: ChatRequest): Promise<ChatResponse> {
    if (!this.signal) return this.model.complete(request)
    const scope = abortScope([this.signal, request.signal])
    try {
      return await this.model.complete({ ...request, signal: scope.signal })
    } finally {
      scope.release()
    }
  }
}
