/**
 * Requests a Durable Object holds open until what they wait for happens, or their time runs out. Each waits under a
 * key (a step); a change releases the keys it settles, with the value the waiters answer.
 * @example const snapshot = await this.waiters.wait(step, 30_000, undefined)
 * @example this.waiters.release((waited) => waited <= step, current)
 */
export class Waiters<Key, Value> {
  private readonly pending = new Set<{ key: Key; settle: (value: Value) => void }>()

  /** Resolves with the value of the release that matches `key`, or `onTimeout` after `timeoutMs`. */
  wait(key: Key, timeoutMs: number, onTimeout: Value): Promise<Value> {
    return new Promise((resolve) => {
      const waiter = {
        key,
        settle: (value: Value) => {
          clearTimeout(timer)
          this.pending.delete(waiter)
          resolve(value)
        },
      }
      const timer = setTimeout(() => waiter.settle(onTimeout), timeoutMs)
      this.pending.add(waiter)
    })
  }

  /** The keys waited on now, each once. */
  keys(): Key[] {
    return [...new Set([...this.pending].map((waiter) => waiter.key))]
  }

  /** Answers `value` to every waiter whose key `matches`. */
  release(matches: (key: Key) => boolean, value: Value): void {
    for (const waiter of this.pending) if (matches(waiter.key)) waiter.settle(value)
  }
}
