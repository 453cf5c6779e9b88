/**
 * Bounded concurrency on `p-limit`: a FIFO limiter for role calls, and an order-preserving concurrent map.
 * Only leaf calls (the LLM roles) take a limiter slot, so nested fan-out (prompts → children → candidates)
 * can never deadlock, and results never depend on completion order.
 */
import pLimit from 'p-limit'

/** Runs async functions with at most `limit` in flight; the rest wait in arrival order. */
export interface Limiter {
  <T>(task: () => Promise<T>): Promise<T>
  readonly active: number
  readonly pending: number
}

/**
 * A FIFO limiter. When `signal` aborts, waiting tasks reject with its reason instead of starting; a task given a free
 * slot still starts (on the next microtask).
 * @example
 * const limit = createLimiter(8)
 * const grades = await Promise.all(candidates.map((c) => limit(() => verifier.grade(c))))
 */
export function createLimiter(limit: number, signal?: AbortSignal): Limiter {
  if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`limiter: expected a positive integer, got ${limit}`)
  const slots = pLimit(limit)
  const run = <T>(task: () => Promise<T>): Promise<T> => {
    const waits = slots.activeCount >= limit
    return slots(() => {
      if (waits && signal?.aborted) throw signal.reason
      return task()
    })
  }
  return Object.defineProperties(run, {
    active: { get: () => slots.activeCount },
    pending: { get: () => slots.pendingCount },
  }) as Limiter
}

/**
 * `Promise.all(items.map(fn))` with at most `limit` calls of `fn` running; results keep the input order.
 * After the first failure no further item starts.
 * @example const results = await mapConcurrent(prompts, 4, (item) => searchPrompt(item))
 */
export function mapConcurrent<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const slots = pLimit(Math.max(1, Math.min(limit, items.length)))
  return slots.map(items, async (item, index) => {
    try {
      return await fn(item, index)
    } catch (error) {
      slots.clearQueue()
      throw error
    }
  })
}
