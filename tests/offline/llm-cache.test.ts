import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import Database from 'better-sqlite3'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest'
import { LlmError, withRetry, type ChatModel } from '../../src/llm/index.ts'
import type { ChatRequest, ChatResponse } from '../../src/llm/types.ts'
import { CachedChatModel, EndpointPool, type PoolRequest } from '../../offline/llm/index.ts'
import { CACHE_FILE } from '../../offline/llm/cache.ts'
import { failureOf } from '../support/failure.ts'
import { startLlmStub, type LlmStub } from '../support/llm-stub.ts'

const TASK = 'score'
const ask = (content: string, extra: Partial<PoolRequest> = {}): PoolRequest => ({
  role: 'scorer',
  messages: [{ role: 'user', content }],
  task: TASK,
  json: true,
  ...extra,
})

/** A model that counts its calls; each call waits for `release()` when `hold` is set, and answers `answer(request)`. */
class CountingModel implements ChatModel {
  readonly id = 'counting:m1'
  readonly sampling = { temperature: 0, max_tokens: 256 }
  calls: ChatRequest[] = []
  hold = false
  answer: (request: ChatRequest, call: number) => string | Error = (request) =>
    `reply to ${request.messages.at(-1)?.content}`
  #waiting: (() => void)[] = []

  async complete(request: ChatRequest): Promise<ChatResponse> {
    this.calls.push(request)
    const call = this.calls.length
    if (this.hold) await new Promise<void>((resolve) => this.#waiting.push(resolve))
    const text = this.answer(request, call)
    if (text instanceof Error) throw text
    return { text, model: 'm1', usage: { prompt_tokens: 50, completion_tokens: 5 } }
  }

  release(): void {
    for (const resolve of this.#waiting.splice(0)) resolve()
  }
}

let dir: string
let model: CountingModel
const open: CachedChatModel[] = []
async function openCache(options: { flushIntervalMs?: number } = {}): Promise<CachedChatModel> {
  const cache = await CachedChatModel.open({ dir, model, ...options })
  open.push(cache)
  return cache
}
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'llm-cache-'))
  model = new CountingModel()
})
afterEach(async () => {
  await Promise.all(open.splice(0).map((cache) => cache.close()))
  await rm(dir, { recursive: true, force: true })
})

describe('CachedChatModel', () => {
  it('answers a repeated question without a call, with zero usage', async () => {
    const cache = await openCache()
    const first = await cache.complete(ask('what is 2+2?'))
    const again = await cache.complete(ask('what is 2+2?'))
    expect(first).toMatchObject({
      text: 'reply to what is 2+2?',
      cached: false,
      usage: { prompt_tokens: 50, completion_tokens: 5 },
    })
    expect(again).toMatchObject({ text: first.text, cached: true, usage: { prompt_tokens: 0, completion_tokens: 0 } })
    expect(model.calls).toHaveLength(1)
    expect(cache.stats()).toMatchObject({ hits: 1, misses: 1, joins: 0, entries: 1 })
  })

  it('keys on role, messages, seed, JSON mode, schema and sampling; not on task, mock reply or signal', async () => {
    const cache = await openCache()
    const base = ask('same words')
    const variants: PoolRequest[] = [
      base,
      { ...base, role: 'analyzer' },
      { ...base, account: 'verifier' },
      { ...base, json: false },
      { ...base, jsonSchema: { name: 'x', schema: { type: 'object' } } },
      { ...base, messages: [{ role: 'system', content: 'same words' }] },
      // Same text, different images: two requests, never one cached reply.
      {
        ...base,
        messages: [
          {
            role: 'user',
            content: 'same words',
            parts: [
              { type: 'text', text: 'same words' },
              { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
            ],
          },
        ],
      },
      {
        ...base,
        messages: [
          {
            role: 'user',
            content: 'same words',
            parts: [
              { type: 'text', text: 'same words' },
              { type: 'image_url', image_url: { url: 'data:image/png;base64,BBBB' } },
            ],
          },
        ],
      },
    ]
    expect(new Set(variants.map((request) => cache.keyOf(request))).size).toBe(variants.length)
    expect(
      cache.keyOf({
        ...base,
        task: 'rescore',
        mock: () => '{}',
        signal: new AbortController().signal,
      }),
    ).toBe(cache.keyOf(base))
    const hotter = await CachedChatModel.open({ dir, model, sampling: { temperature: 1, max_tokens: 256 } })
    open.push(hotter)
    expect(hotter.keyOf(base)).not.toBe(cache.keyOf(base))
    // Sampled (temperature > 0), another seed is another draw; greedy (temperature 0), it is the same question.
    const seeded = [base, { ...base, seed: 1 }, { ...base, seed: 2 }]
    expect(new Set(seeded.map((request) => hotter.keyOf(request))).size).toBe(3)
    const greedy = await CachedChatModel.open({ dir, model, sampling: { temperature: 0, max_tokens: 256 } })
    open.push(greedy)
    expect(new Set(seeded.map((request) => greedy.keyOf(request))).size).toBe(1)
  })

  it('shares one call among identical concurrent questions (single-flight)', async () => {
    const cache = await openCache()
    model.hold = true
    const pending = Array.from({ length: 5 }, () => cache.complete(ask('popular')))
    const other = cache.complete(ask('different'))
    // Both questions reach the model; the four repeats of 'popular' join the first instead of calling.
    await vi.waitFor(() => expect(model.calls).toHaveLength(2))
    model.release()
    const replies = await Promise.all(pending)
    expect(new Set(replies.map((reply) => reply.text))).toEqual(new Set(['reply to popular']))
    expect(replies.every((reply) => !reply.cached)).toBe(true)
    await other
    expect(model.calls).toHaveLength(2)
    expect(cache.stats()).toMatchObject({ misses: 2, joins: 4, hits: 0, entries: 2 })
  })

  it('never stores a failure; every joiner sees it and the next ask calls again', async () => {
    const cache = await openCache()
    model.hold = true
    model.answer = (request, call) =>
      call === 1 ? new LlmError('server_error', 'boom') : `ok ${request.messages[0]!.content}`
    const pending = [cache.complete(ask('flaky')), cache.complete(ask('flaky'))]
    model.release()
    for (const failure of await Promise.all(pending.map(failureOf)))
      expect(failure).toMatchObject({ kind: 'server_error' })
    model.hold = false
    expect((await cache.complete(ask('flaky'))).text).toBe('ok flaky')
    expect(model.calls).toHaveLength(2)
    expect(cache.stats()).toMatchObject({ entries: 1, joins: 1 })
  })

  it('lets one caller abort its wait without cancelling the shared call', async () => {
    const cache = await openCache()
    model.hold = true
    const controller = new AbortController()
    const impatient = cache.complete(ask('slow', { signal: controller.signal }))
    const patient = cache.complete(ask('slow'))
    controller.abort(new Error('gave up'))
    await expect(impatient).rejects.toThrow('gave up')
    model.release()
    expect((await patient).text).toBe('reply to slow')
    expect(model.calls[0]!.signal).toBeUndefined()
  })

  it('survives a restart: the cache file answers the next run', async () => {
    const first = await openCache()
    for (const question of ['a', 'b', 'c']) await first.complete(ask(question))
    await first.close()
    const db = new Database(path.join(dir, CACHE_FILE), { readonly: true })
    const rows = db.prepare('SELECT * FROM replies ORDER BY text').all() as Record<string, unknown>[]
    db.close()
    expect(rows).toHaveLength(3)
    expect(rows[0]).toMatchObject({ account: 'scorer', model_id: 'counting:m1', text: 'reply to a' })
    expect(JSON.stringify(rows)).not.toContain('"content"') // prompts are not stored, only keys and replies

    const second = await openCache()
    expect(second.stats()).toMatchObject({ loaded: 3, entries: 3 })
    for (const question of ['a', 'b', 'c'])
      expect(await second.complete(ask(question))).toMatchObject({ cached: true, text: `reply to ${question}` })
    expect(model.calls).toHaveLength(3)
  })

  it('keeps every committed reply when the process dies without closing the cache', async () => {
    const first = await openCache()
    await first.complete(ask('kept'))
    await first.flush()
    const second = await openCache()
    expect(second.stats()).toMatchObject({ loaded: 1, entries: 1 })
    expect((await second.complete(ask('kept'))).cached).toBe(true)
    await second.complete(ask('new after crash'))
    await second.close()
    const third = await openCache()
    expect(third.stats()).toMatchObject({ loaded: 2, entries: 2 })
  })

  it('shares one file between caches open at once: each answers what the other committed', async () => {
    const one = await openCache()
    const other = await openCache()
    await one.complete(ask('one'))
    await one.flush()
    expect((await other.complete(ask('one'))).cached).toBe(true)
    await other.complete(ask('two'))
    await other.flush()
    expect((await one.complete(ask('two'))).cached).toBe(true)
    expect(model.calls).toHaveLength(2)
  })

  it('forgets a reply the caller found invalid, also across a restart', async () => {
    const cache = await openCache()
    model.answer = (_request, call) => (call === 1 ? 'Sure! Here are the grades.' : '{"grades":[]}')
    const parse = (reply: { text: string }) => {
      try {
        return JSON.parse(reply.text) as unknown
      } catch {
        throw new LlmError('invalid_reply', 'not JSON')
      }
    }
    // The retry asks the model again instead of replaying the cached bad reply.
    const parsed = await withRetry(() => cache.completeParsed(ask('grade it'), parse), {
      maxAttempts: 3,
      sleep: async () => {},
    })
    expect(parsed).toEqual({ grades: [] })
    expect(model.calls).toHaveLength(2)
    expect(cache.stats()).toMatchObject({ forgotten: 1, entries: 1 })

    // forget with a stale reply does not evict the newer good one; without one it does.
    expect(cache.forget(ask('grade it'), { text: 'Sure! Here are the grades.' })).toBe(false)
    await cache.complete(ask('bad later'))
    expect(cache.forget(ask('bad later'))).toBe(true)
    expect(cache.forget(ask('bad later'))).toBe(false)
    await cache.close()

    const reopened = await openCache()
    expect((await reopened.complete(ask('grade it'))).cached).toBe(true)
    expect((await reopened.complete(ask('bad later'))).cached).toBe(false)
    expect(model.calls).toHaveLength(4)
  })

  it('batches writes: nothing is lost on close, even within the flush interval', async () => {
    const cache = await openCache({ flushIntervalMs: 60_000 })
    await Promise.all(Array.from({ length: 50 }, (_, i) => cache.complete(ask(`q${i}`))))
    expect(cache.stats().pending_writes).toBe(50)
    await cache.close()
    const reopened = await openCache()
    expect(reopened.stats().entries).toBe(50)
  })
})

describe('CachedChatModel over the endpoint pool', () => {
  let stubs: LlmStub[]
  beforeAll(async () => {
    stubs = await Promise.all([startLlmStub(), startLlmStub(), startLlmStub()])
    for (const stub of stubs) stub.respondWith((body) => `{"echo":${JSON.stringify(body.messages.at(-1)?.content)}}`)
  })
  afterAll(() => Promise.all(stubs.map((stub) => stub.close())))

  it('repeated and concurrent identical questions cost one HTTP request each, across a resume', async () => {
    const endpoints = stubs.map((stub) => ({ base_url: stub.baseUrl, max_concurrency: 2 }))
    const pool = new EndpointPool({ endpoints, model: 'stub-model', seed: 5 })
    const cache = await CachedChatModel.open({ dir, model: pool })
    const questions = Array.from({ length: 10 }, (_, i) => `question ${i}`)
    // Each question asked four times at once, then all of them again.
    await Promise.all(questions.flatMap((question) => Array.from({ length: 4 }, () => cache.complete(ask(question)))))
    await Promise.all(questions.map((question) => cache.complete(ask(question))))
    const sent = () => stubs.reduce((sum, stub) => sum + stub.requests.length, 0)
    expect(sent()).toBe(10)
    expect(cache.stats()).toMatchObject({ misses: 10, joins: 30, hits: 10 })
    expect(pool.usage().total.calls).toBe(10)
    await cache.close()
    await pool.close()

    const resumedPool = new EndpointPool({ endpoints, model: 'stub-model', seed: 5 })
    const resumed = await CachedChatModel.open({ dir, model: resumedPool })
    const replies = await Promise.all(questions.map((question) => resumed.complete(ask(question))))
    expect(replies.map((reply) => JSON.parse(reply.text).echo)).toEqual(questions)
    expect(sent()).toBe(10)
    // At the pool's temperature 0 another seed is the same question: a greedy decode does not depend on it.
    await resumed.complete(ask('question 0', { seed: 6 }))
    expect(sent()).toBe(10)
    await resumed.close()
    await resumedPool.close()
  })
})

describe('CachedChatModel file handling', () => {
  it('starts from an empty directory that does not exist yet', async () => {
    const nested = path.join(dir, 'a', 'b')
    const cache = await CachedChatModel.open({ dir: nested, model })
    open.push(cache)
    expect(cache.file).toBe(path.join(nested, CACHE_FILE))
    expect(cache.stats()).toMatchObject({ entries: 0, loaded: 0 })
  })

  it('refuses a file that is not a reply cache instead of overwriting it', async () => {
    await writeFile(path.join(dir, CACHE_FILE), '{"key":"x","reply":{"te')
    await expect(openCache()).rejects.toThrow(/not a database/)
  })
})
