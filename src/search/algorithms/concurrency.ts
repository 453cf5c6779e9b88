/**
 * Bounded concurrency without timers: a FIFO limiter for role calls, and an order-preserving concurrent map.
 * Only leaf calls (the LLM roles) take a limiter slot, so nested fan-out (prompts → children → candidates)
 * can never deadlock, and results never depend on completion order.
 */

/** Runs async functions with at most `limit` in flight; the rest wait in arrival order. */
export interface Limiter {
  <T>(task: () => Promise<T>): Promise<T>
  readonly active: number
  readonly pending: number
}

/**
 * A FIFO limiter. When `signal` aborts, waiting tasks reject with its reason instead of starting.
 * @example
 * const limit = createLimiter(8)
 * const grades = await Promise.all(candidates.map((c) => limit(() => verifier.grade(c))))
 */
export function createLimiter(limit: number, signal?: AbortSignal): Limiter {
  if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`limiter: expected a positive integer, got ${limit}`)
  const queue: Array<() => void> = []
  let active = 0
  const release = () => {
    active--
    const next = queue.shift()
    if (next) next()
  }
  const run = <T>(task: () => Promise<T>): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const start = () => {
        if (signal?.aborted) {
          reject(signal.reason)
          const next = queue.shift()
          if (next) next()
          return
        }
        active++
        let result: Promise<T>
        try {
          result = task()
        } catch (error) {
          result = Promise.reject(error)
        }
        result.then(resolve, reject).finally(release)
      }
      if (active < limit) start()
      else queue.push(start)
    })
  return Object.defineProperties(run, {
    active: { get: () => active },
    pending: { get: () => queue.length },
  }) as Limiter
}

/**
 * `Promise.all(items.map(fn))` with at most `limit` calls of `fn` running; results keep the input order.
 * @example const results = await mapConcurrent(prompts, 4, (item) => searchPrompt(item))
 */
export async function mapConcurrent<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length)
  let cursor = 0
  let failed = false
  const worker = async () => {
    while (!failed && cursor < items.length) {
      const index = cursor++
      try {
        results[index] = await fn(items[index]!, index)
      } catch (error) {
        failed = true
        throw error
      }
    }
  }
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker))
  return results
}
