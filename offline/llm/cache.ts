/**
 * A content-addressed reply cache for the offline search (autosr §8.5: redundant LLM work, a cache
 * lost on resume). A question asked twice — in the same run, by concurrent workers, or after a
 * restart — costs one call.
 *
 * Storage: an in-memory map backed by an append-only JSONL file `<dir>/llm-cache.jsonl`, loaded on
 * open. Writes are batched (one append + fsync per batch); a crash loses at most the last batch, and
 * a torn last line is cut off on the next open. A `forget` appends a tombstone, so an evicted reply
 * stays evicted after a restart.
 *
 * Caching policy: `complete()` stores every reply that arrived (the raw text). A caller that finds
 * the text unusable must `forget()` it, or use `completeParsed()` which does so itself; otherwise the
 * broken reply would be replayed on every retry.
 */
import { createHash } from 'node:crypto'
import { mkdir, open, readFile, truncate, type FileHandle } from 'node:fs/promises'
import path from 'node:path'
import type { ChatModel, ChatRequest, ChatResponse } from '../../src/llm/types.ts'
import type { PoolRequest, SamplingSettings } from './pool.ts'

/** The file name inside the cache directory. */
export const CACHE_FILE = 'llm-cache.jsonl'
/** Bump when the key derivation changes: old entries then simply stop matching. */
const KEY_VERSION = 1

export interface CachedChatModelOptions {
  /** Directory of `llm-cache.jsonl` (created if missing). */
  dir: string
  /** The model that answers misses (an `EndpointPool`, an `OpenAIChatModel`, …). */
  model: ChatModel
  /**
   * The sampling settings the model sends with every request, part of the key. Defaults to
   * `model.sampling` when the model exposes it (the `EndpointPool` does); set it for other models.
   */
  sampling?: SamplingSettings
  /** Pending lines are written this long after the first of a batch. Default 50 ms. */
  flushIntervalMs?: number
  /** fsync after every batch (default true). */
  fsync?: boolean
}

/** A reply as the cache returns it: `cached` replies cost no tokens (their `usage` is zero). */
export interface CachedResponse extends ChatResponse {
  cached: boolean
}

export interface CacheStats {
  /** Answered from the map. */
  hits: number
  /** Sent to the model. */
  misses: number
  /** Answered by joining an identical call already in flight (single-flight). */
  joins: number
  /** Replies in the map now. */
  entries: number
  /** Replies evicted by `forget`. */
  forgotten: number
  /** Lines read from the file on open (replies and tombstones). */
  loaded: number
  /** Unreadable lines skipped on open (a torn last line included). */
  skipped_lines: number
  /** Lines not yet on disk. */
  pending_writes: number
}

interface StoredReply {
  text: string
  model: string
  usage: ChatResponse['usage']
}

type CacheLine =
  | { key: string; at: string; account: string; model_id: string; reply: StoredReply }
  | { key: string; at: string; forget: true }

/**
 * A `ChatModel` that answers repeated questions from a persistent cache and shares one call among
 * concurrent identical questions. Open it with `CachedChatModel.open`, `close()` it when done.
 * @example
 * const cache = await CachedChatModel.open({ dir: 'runs/r1', model: pool })
 * const grades = await cache.completeParsed(request, (reply) => parseReplyAs(Grades, reply.text, 'verifier'))
 * console.log(cache.stats())
 * await cache.close()
 */
export class CachedChatModel implements ChatModel {
  readonly id: string
  readonly file: string
  readonly #model: ChatModel
  readonly #sampling: SamplingSettings | undefined
  readonly #entries = new Map<string, StoredReply>()
  readonly #inFlight = new Map<string, Promise<ChatResponse>>()
  readonly #handle: FileHandle
  readonly #flushIntervalMs: number
  readonly #fsync: boolean
  readonly #stats: Omit<CacheStats, 'entries' | 'pending_writes'>
  #pending: string[] = []
  #flushTimer: ReturnType<typeof setTimeout> | undefined
  #writing: Promise<void> = Promise.resolve()
  #writeError: unknown
  #closed = false

  private constructor(
    options: CachedChatModelOptions,
    file: string,
    handle: FileHandle,
    stats: { loaded: number; skipped_lines: number },
  ) {
    this.#model = options.model
    this.id = options.model.id
    this.file = file
    this.#handle = handle
    this.#sampling = options.sampling ?? (options.model as { sampling?: SamplingSettings }).sampling
    this.#flushIntervalMs = options.flushIntervalMs ?? 50
    this.#fsync = options.fsync ?? true
    this.#stats = { hits: 0, misses: 0, joins: 0, forgotten: 0, ...stats }
  }

  /**
   * Opens (or creates) `<dir>/llm-cache.jsonl`, loads it, and cuts off a torn last line left by a crash.
   * @example const cache = await CachedChatModel.open({ dir: '.cache', model: pool })
   */
  static async open(options: CachedChatModelOptions): Promise<CachedChatModel> {
    await mkdir(options.dir, { recursive: true })
    const file = path.join(options.dir, CACHE_FILE)
    let content: Buffer
    try {
      content = await readFile(file)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
      content = Buffer.alloc(0)
    }
    // Everything after the last newline is a line whose write never finished: drop it from the
    // file too, or the next append would be glued onto it.
    const end = content.lastIndexOf(0x0a) + 1
    let skipped = 0
    if (end < content.length) {
      skipped++
      await truncate(file, end)
    }
    const entries = new Map<string, StoredReply>()
    let loaded = 0
    for (const line of content.subarray(0, end).toString('utf8').split('\n')) {
      if (line.trim() === '') continue
      let record: CacheLine
      try {
        record = JSON.parse(line) as CacheLine
      } catch {
        skipped++
        continue
      }
      if (typeof record?.key !== 'string') {
        skipped++
        continue
      }
      loaded++
      if ('forget' in record) entries.delete(record.key)
      else if (record.reply && typeof record.reply.text === 'string') entries.set(record.key, record.reply)
      else skipped++
    }
    const handle = await open(file, 'a')
    const cache = new CachedChatModel(options, file, handle, { loaded, skipped_lines: skipped })
    for (const [key, reply] of entries) cache.#entries.set(key, reply)
    return cache
  }

  /**
   * The cache key of a request: sha256 over the model id, the accounting role, the messages and the
   * sampling settings (temperature, max_tokens, seed, JSON mode, JSON schema). The `task` label, the mock reply and
   * the abort signal are not part of it.
   * @example cache.keyOf(request) // '3f9a…' (64 hex digits)
   */
  keyOf(request: ChatRequest): string {
    const poolRequest = request as PoolRequest
    const material = [
      KEY_VERSION,
      this.id,
      poolRequest.account ?? poolRequest.role,
      // Parts (images) join the key only when present, so every text-only key stays what it was.
      poolRequest.messages.map((message) => [message.role, message.content, ...(message.parts ? [message.parts] : [])]),
      {
        temperature: this.#sampling?.temperature ?? null,
        max_tokens: this.#sampling?.max_tokens ?? null,
        seed: poolRequest.seed ?? this.#sampling?.seed ?? null,
        json: poolRequest.json,
        json_schema: poolRequest.jsonSchema ?? null,
      },
    ]
    return createHash('sha256').update(JSON.stringify(material)).digest('hex')
  }

  /**
   * Answers from the cache, joins an identical call in flight, or asks the model and stores the raw
   * reply. Failures are never stored, and every caller of a shared call sees the same failure.
   * A caller's abort signal cancels only its own wait, not the shared call.
   * @example const reply = await cache.complete(request); if (reply.cached) console.log('free')
   */
  async complete(request: ChatRequest): Promise<CachedResponse> {
    const key = this.keyOf(request)
    const stored = this.#entries.get(key)
    if (stored) {
      this.#stats.hits++
      return { text: stored.text, model: stored.model, usage: { prompt_tokens: 0, completion_tokens: 0 }, cached: true }
    }
    let flight = this.#inFlight.get(key)
    if (flight) {
      this.#stats.joins++
    } else {
      this.#stats.misses++
      const { signal: _signal, ...shared } = request
      flight = this.#model.complete(shared).then((reply) => {
        this.#store(key, request, reply)
        return reply
      })
      flight.finally(() => this.#inFlight.delete(key)).catch(() => undefined)
      this.#inFlight.set(key, flight)
    }
    const reply = await raceAbort(flight, request.signal)
    return { text: reply.text, model: reply.model, usage: { ...reply.usage }, cached: false }
  }

  /**
   * Asks (or reuses) a reply and parses it; when `parse` throws, the reply is forgotten before the
   * error propagates, so the caller's retry asks the model again instead of replaying it.
   * @example const grades = await withRetry(() => cache.completeParsed(request, (reply) => parseReplyAs(Grades, reply.text, 'verifier')))
   */
  async completeParsed<T>(request: ChatRequest, parse: (reply: CachedResponse) => T | Promise<T>): Promise<T> {
    const reply = await this.complete(request)
    try {
      return await parse(reply)
    } catch (error) {
      this.forget(request, reply)
      throw error
    }
  }

  /**
   * Evicts the stored reply of a request (in memory and, by a tombstone line, on disk). With `reply`,
   * evicts only if the stored reply is still that one, so a late caller cannot evict a newer good reply.
   * Returns whether anything was evicted.
   * @example if (!isUsable(reply.text)) cache.forget(request, reply)
   */
  forget(request: ChatRequest, reply?: Pick<ChatResponse, 'text'>): boolean {
    const key = this.keyOf(request)
    const stored = this.#entries.get(key)
    if (!stored || (reply && stored.text !== reply.text)) return false
    this.#entries.delete(key)
    this.#stats.forgotten++
    this.#append({ key, at: new Date().toISOString(), forget: true })
    return true
  }

  /**
   * Counters since open: hits, misses, in-flight joins, entries, forgotten, loaded and skipped lines.
   * @example const { hits, misses, joins } = cache.stats()
   */
  stats(): CacheStats {
    return { ...this.#stats, entries: this.#entries.size, pending_writes: this.#pending.length }
  }

  /**
   * Writes (and fsyncs) every pending line now. Rejects if a write failed.
   * @example await cache.flush()
   */
  async flush(): Promise<void> {
    clearTimeout(this.#flushTimer)
    this.#flushTimer = undefined
    const lines = this.#pending
    this.#pending = []
    if (lines.length > 0) {
      this.#writing = this.#writing.then(async () => {
        try {
          await this.#handle.appendFile(lines.join(''), 'utf8')
          if (this.#fsync) await this.#handle.datasync()
        } catch (error) {
          this.#writeError ??= error
        }
      })
    }
    await this.#writing
    if (this.#writeError !== undefined) throw this.#writeError
  }

  /**
   * Flushes and closes the file. Calls still in flight are not waited for; their replies are not stored.
   * @example await cache.close()
   */
  async close(): Promise<void> {
    if (this.#closed) return
    await this.flush().finally(async () => {
      this.#closed = true
      await this.#handle.close()
    })
  }

  #store(key: string, request: ChatRequest, reply: ChatResponse): void {
    const stored: StoredReply = {
      text: reply.text,
      model: reply.model,
      usage: { prompt_tokens: reply.usage.prompt_tokens, completion_tokens: reply.usage.completion_tokens },
    }
    this.#entries.set(key, stored)
    const poolRequest = request as PoolRequest
    this.#append({
      key,
      at: new Date().toISOString(),
      account: poolRequest.account ?? poolRequest.role,
      model_id: this.id,
      reply: stored,
    })
  }

  #append(line: CacheLine): void {
    if (this.#closed) return
    this.#pending.push(`${JSON.stringify(line)}\n`)
    this.#flushTimer ??= setTimeout(() => void this.flush().catch(() => undefined), this.#flushIntervalMs)
  }
}

function raceAbort<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise
  if (signal.aborted) return Promise.reject(signal.reason)
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason)
    signal.addEventListener('abort', onAbort, { once: true })
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort)
        resolve(value)
      },
      (error) => {
        signal.removeEventListener('abort', onAbort)
        reject(error)
      },
    )
  })
}
