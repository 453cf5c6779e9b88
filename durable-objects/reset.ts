/**
 * Whether a Durable Object call failed because the object was reset under it (a deploy, an eviction, an
 * `abort()`): the runtime marks such errors `durableObjectReset` (or `retryable`), and the stub that saw
 * one must not be reused.
 * @example if (isObjectReset(error)) stub = env.RUBRIC_INSTANCE.getByName(name)
 */
function isObjectReset(error: unknown): boolean {
  const marks = error as { durableObjectReset?: unknown; retryable?: unknown } | null | undefined
  return marks?.durableObjectReset === true || marks?.retryable === true
}

/**
 * Runs an idempotent Durable Object call, and once more when the object was reset during it. `call` must get
 * its stub afresh each time (`env.NS.getByName(name).method(…)`), since a stub broken by a reset stays broken.
 * @example const snapshot = await againAfterReset(() => env.RUBRIC_INSTANCE.getByName(name).snapshot(address))
 */
export async function againAfterReset<T>(call: () => PromiseLike<T>): Promise<T> {
  try {
    return await call()
  } catch (error) {
    if (!isObjectReset(error)) throw error
    return call()
  }
}
