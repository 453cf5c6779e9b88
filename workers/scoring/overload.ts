import { AppError } from '../../src/errors/index.ts'

/** Seconds a caller is told to wait after an overload: long enough for a queue of requests to drain. */
export const OVERLOAD_RETRY_AFTER_S = 1

/**
 * Whether a Durable Object or D1 call failed because the object or database had more requests than it could queue.
 * The runtime marks a Durable Object's own `overloaded`; D1 and older runtimes say so in the message.
 * @example if (isOverloaded(error)) throw new AppError('overloaded', …)
 */
export function isOverloaded(error: unknown): boolean {
  const marked = error as { overloaded?: unknown; message?: unknown } | null | undefined
  if (marked?.overloaded === true) return true
  return (
    typeof marked?.message === 'string' &&
    /\boverloaded\b|too many requests queued|D1_ERROR.*(?:overloaded|too many requests)/i.test(marked.message)
  )
}

/**
 * Runs a storage call and turns an overload into a 503 `overloaded` with `Retry-After`, which every client retries
 * (an overload is not a bug of the caller's request, and the runtime says not to retry it at once in here).
 * @example const reply = await durableObjectCall(() => stub.record(address, submissions, version))
 */
export async function durableObjectCall<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call()
  } catch (error) {
    if (isOverloaded(error)) {
      throw new AppError(
        'overloaded',
        'the run is taking more requests than its ledger can queue right now; retry after the delay',
        { retryAfterSeconds: OVERLOAD_RETRY_AFTER_S },
      )
    }
    throw error
  }
}
