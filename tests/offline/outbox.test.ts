import { afterEach, describe, expect, it, vi } from 'vitest'
import { Outbox } from '../../workers/outbox/index.ts'

/** A sink that records each write (one array of items per write). */
function recordingSink() {
  const writes: string[][] = []
  return { writes, write: async (_sink: string, items: string[]) => void writes.push(items) }
}

describe('Outbox', () => {
  afterEach(() => vi.restoreAllMocks())

  it('holds items until the delay and writes them in one call, inside the first request’s deferred work', async () => {
    const { writes, write } = recordingSink()
    const outbox = new Outbox<string, string>({ what: 'items', maxItems: 10, flushAfterMs: 20, write })
    const deferred: Promise<unknown>[] = []
    for (const item of ['a', 'b', 'c']) outbox.add('sink', item, (work) => deferred.push(work))
    expect(deferred).toHaveLength(1)
    expect(writes).toEqual([])
    await Promise.all(deferred)
    expect(writes).toEqual([['a', 'b', 'c']])
    // The next item starts a new batch with its own timer.
    outbox.add('sink', 'd', (work) => deferred.push(work))
    await Promise.all(deferred)
    expect(writes).toEqual([['a', 'b', 'c'], ['d']])
  })

  it('writes at once when maxItems are waiting; the pending timer then finds nothing to write', async () => {
    const { writes, write } = recordingSink()
    const outbox = new Outbox<string, string>({ what: 'items', maxItems: 2, flushAfterMs: 20, write })
    const deferred: Promise<unknown>[] = []
    outbox.add('sink', 'a', (work) => deferred.push(work))
    outbox.add('sink', 'b', (work) => deferred.push(work))
    await deferred[1]
    expect(writes).toEqual([['a', 'b']])
    await Promise.all(deferred)
    expect(writes).toEqual([['a', 'b']])
  })

  it('writes to the sink of the latest add, and logs a failed write with its count instead of throwing', async () => {
    const error = vi.spyOn(console, 'error').mockImplementation(() => {})
    const sinks: string[] = []
    const outbox = new Outbox<string, string>({
      what: 'analysis jobs',
      maxItems: 2,
      flushAfterMs: 20,
      write: async (sink) => {
        sinks.push(sink)
        throw new Error('queue unavailable')
      },
    })
    const deferred: Promise<unknown>[] = []
    outbox.add('old-binding', 'a', (work) => deferred.push(work))
    outbox.add('new-binding', 'b', (work) => deferred.push(work))
    await expect(Promise.all(deferred)).resolves.toBeDefined()
    expect(sinks).toEqual(['new-binding'])
    expect(error).toHaveBeenCalledWith('could not write 2 analysis jobs', expect.any(Error))
  })
})
