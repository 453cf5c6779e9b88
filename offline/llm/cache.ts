/**
 * A content-addressed reply cache for the offline search (autosr §8.5: redundant LLM work, a cache
 * lost on resume). A question asked twice — in the same run, by concurrent workers, or after a
 * restart — costs one call.
 *
 * Storage: one SQLite file `<dir>/llm-cache.sqlite` (better-sqlite3, WAL), read per lookup, so memory
 * does not grow with the cache. Writes are batched (one transaction per batch); a crash loses at most
 * the last batch. A `forget` deletes the row, so an evicted reply stays evicted after a restart.
 *
 * Caching policy: `complete()` stores every reply that arrived (the raw text). A caller that finds
 * the text unusable must `forget()` it, or use `completeParsed()` which does so itself; otherwise the
 * broken reply would be replayed on every retry.
 */
import { createHash } from 'node:crypto'
import { mkdir } from 'node:fs/promises'
import path from 'node:path'
import Database from 'better-sqlite3'
import type { ChatModel, ChatRequest, ChatResponse } from '../../src/llm/types.ts'
import type { PoolRequest, SamplingSettings } from './pool.ts'

/**
 * The file name inside the cache directory.
 * @internal
 */
export const CACHE_FILE = 'llm-cache.sqlite'
/** Bump when the key derivation changes: old entries then simply stop matching. */
const KEY_VERSION = 1

export interface CachedChatModelOptions {
  /** Directory of `llm-cache.sqlite` (created if missing). */
  dir: string
  /** The model that answers misses (an `EndpointPool`, an `OpenAIChatModel`, …). */
  model: ChatModel
  /**
   * The sampling settings the model sends with every request, part of the key. Defaults to
   * `model.sampling` when the model exposes it (the `EndpointPool` does); set it for other models.
   */
  sampling?: SamplingSettings
  /** Pending writes are committed this long after the first of a batch. Default 50 ms. */
  flushIntervalMs?: number
  /** Commit every batch durably (SQLite `synchronous = FULL`; default true). */
  fsync?: boolean
}

/** A reply as the cache returns it: `cached` replies cost no tokens (their `usage` is zero). */
export interface CachedResponse extends ChatResponse {
  cached: boolean
}

export interface CacheStats {
  /** Answered from the cache. */
  hits: number
  /** Sent to the model. */
  misses: number
  /** Answered by joining an identical call already in flight (single-flight). */
  joins: number
  /** Replies stored now. */
  entries: number
  /** Replies evicted by `forget`. */
  forgotten: number
  /** Replies in the file when it was opened. */
  loaded: number
  /** Writes not yet committed. */
  pending_writes: number
}

interface StoredReply {
  text: string
  model: string
  usage: ChatResponse['usage']
}

/** A write waiting for the next batch: a reply to store, or null for a `forget`. */
interface PendingWrite {
  key: string
  row: { at: string; account: string; model_id: string; reply: StoredReply } | null
}

const SCHEMA = `CREATE TABLE IF NOT EXISTS replies (
  key TEXT PRIMARY KEY,
  at TEXT NOT NULL,
  account TEXT NOT NULL,
  model_id TEXT NOT NULL,
  text TEXT NOT NULL,
  model TEXT NOT NULL,
  prompt_tokens INTEGER NOT NULL,
  completion_tokens INTEGER NOT NULL
) WITHOUT ROWID`

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
  readonly #db: Database.Database
  /** Prepared once: compiling the statement per lookup cost more than the lookup. */
  readonly #select: Database.Statement<
    [string],
    { text: string; model: string; prompt_tokens: number; completion_tokens: number }
  >
  readonly #inFlight = new Map<string, Promise<ChatResponse>>()
  readonly #flushIntervalMs: number
  readonly #stats: Omit<CacheStats, 'entries' | 'pending_writes'>
  /** Writes not yet committed, by key: lookups see them before the file. */
  #pending = new Map<string, PendingWrite>()
  #entries: number
  #flushTimer: ReturnType<typeof setTimeout> | undefined
  #writeError: unknown
  #closed = false

  private constructor(options: CachedChatModelOptions, file: string, db: Database.Database) {
    this.#model = options.model
    this.id = options.model.id
    this.file = file
    this.#db = db
    this.#select = db.prepare('SELECT text, model, prompt_tokens, completion_tokens FROM replies WHERE key = ?')
    this.#sampling = options.sampling ?? (options.model as { sampling?: SamplingSettings }).sampling
    this.#flushIntervalMs = options.flushIntervalMs ?? 50
    this.#entries = (db.prepare('SELECT count(*) AS n FROM replies').get() as { n: number }).n
    this.#stats = { hits: 0, misses: 0, joins: 0, forgotten: 0, loaded: this.#entries }
  }

  /**
   * Opens (or creates) `<dir>/llm-cache.sqlite`.
   * @example const cache = await CachedChatModel.open({ dir: '.cache', model: pool })
   */
  static async open(options: CachedChatModelOptions): Promise<CachedChatModel> {
    await mkdir(options.dir, { recursive: true })
    const file = path.join(options.dir, CACHE_FILE)
    const db = new Database(file)
    try {
      db.pragma('journal_mode = WAL')
      db.pragma(`synchronous = ${(options.fsync ?? true) ? 'FULL' : 'NORMAL'}`)
      db.exec(SCHEMA)
    } catch (error) {
      db.close()
      throw error
    }
    return new CachedChatModel(options, file, db)
  }

  /**
   * The cache key of a request: sha256 over the model id, the accounting role, the messages and the
   * sampling settings (temperature, max_tokens, seed — left out at temperature 0 —, JSON mode, JSON schema). The
   * `task` label, the mock reply and the abort signal are not part of it.
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
        max_tokens: this.#sampling?.max_tokens ?? poolRequest.maxTokens ?? null,
        // A greedy decode (temperature 0) does not depend on the seed: the same question with another seed is the
        // same question, answered from the cache rather than asked again.
        seed: this.#sampling?.temperature === 0 ? null : (poolRequest.seed ?? this.#sampling?.seed ?? null),
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
    const stored = this.#lookup(key)
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
   * @example const grades = await withRetry(() => cache.completeParsed(request, (reply) => parseReplyAs(Grades,
   *   reply.text, 'verifier')))
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
   * Evicts the stored reply of a request (its row is deleted with the next batch). With `reply`,
   * evicts only if the stored reply is still that one, so a late caller cannot evict a newer good reply.
   * Returns whether anything was evicted.
   * @example if (!isUsable(reply.text)) cache.forget(request, reply)
   */
  forget(request: ChatRequest, reply?: Pick<ChatResponse, 'text'>): boolean {
    const key = this.keyOf(request)
    const stored = this.#lookup(key)
    if (!stored || (reply && stored.text !== reply.text)) return false
    this.#entries--
    this.#stats.forgotten++
    this.#write({ key, row: null })
    return true
  }

  /**
   * Counters since open: hits, misses, in-flight joins, entries, forgotten, loaded and pending writes.
   * @example const { hits, misses, joins } = cache.stats()
   */
  stats(): CacheStats {
    return { ...this.#stats, entries: this.#entries, pending_writes: this.#pending.size }
  }

  /**
   * Commits every pending write now, in one transaction. Rejects if a write failed.
   * @example await cache.flush()
   */
  async flush(): Promise<void> {
    clearTimeout(this.#flushTimer)
    this.#flushTimer = undefined
    const writes = [...this.#pending.values()]
    this.#pending = new Map()
    if (writes.length > 0 && this.#writeError === undefined) {
      try {
        this.#commit(writes)
      } catch (error) {
        this.#writeError = error
      }
    }
    if (this.#writeError !== undefined) throw this.#writeError
  }

  /**
   * Commits and closes the file. Calls still in flight are not waited for; their replies are not stored.
   * @example await cache.close()
   */
  async close(): Promise<void> {
    if (this.#closed) return
    await this.flush().finally(() => {
      this.#closed = true
      this.#db.close()
    })
  }

  #lookup(key: string): StoredReply | undefined {
    const pending = this.#pending.get(key)
    if (pending) return pending.row?.reply
    const row = this.#select.get(key)
    return row
      ? {
          text: row.text,
          model: row.model,
          usage: { prompt_tokens: row.prompt_tokens, completion_tokens: row.completion_tokens },
        }
      : undefined
  }

  #store(key: string, request: ChatRequest, reply: ChatResponse): void {
    const stored: StoredReply = {
      text: reply.text,
      model: reply.model,
      usage: { prompt_tokens: reply.usage.prompt_tokens, completion_tokens: reply.usage.completion_tokens },
    }
    // Only a miss is stored, and single-flight keeps a second call for its key from starting: the key is in neither
    // the file nor the pending writes, so it adds an entry (no second lookup to find that out).
    this.#entries++
    const poolRequest = request as PoolRequest
    this.#write({
      key,
      row: {
        at: new Date().toISOString(),
        account: poolRequest.account ?? poolRequest.role,
        model_id: this.id,
        reply: stored,
      },
    })
  }

  #write(write: PendingWrite): void {
    if (this.#closed) return
    this.#pending.delete(write.key)
    this.#pending.set(write.key, write)
    this.#flushTimer ??= setTimeout(() => void this.flush().catch(() => undefined), this.#flushIntervalMs)
  }

  #commit(writes: PendingWrite[]): void {
    const upsert = this.#db.prepare(
      `INSERT OR REPLACE INTO replies (key, at, account, model_id, text, model, prompt_tokens, completion_tokens)
       VALUES (@key, @at, @account, @model_id, @text, @model, @prompt_tokens, @completion_tokens)`,
    )
    const remove = this.#db.prepare('DELETE FROM replies WHERE key = ?')
    this.#db.transaction(() => {
      for (const { key, row } of writes) {
        if (!row) remove.run(key)
        else
          upsert.run({
            key,
            at: row.at,
            account: row.account,
            model_id: row.model_id,
            text: row.reply.text,
            model: row.reply.model,
            prompt_tokens: row.reply.usage.prompt_tokens,
            completion_tokens: row.reply.usage.completion_tokens,
          })
      }
    })()
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
