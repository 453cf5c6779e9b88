/**
 * Work that runs one at a time per key: a run over keys waits until no run in flight holds any of them, then holds
 * them all until it ends. Two requests for the same rollout id so never interleave: the second sees what the first
 * wrote. Runs over disjoint keys go at once; nothing waits on a run that waits, so there is no cycle.
 * @example await turns.run(['r-1', 'r-2'], async () => record(…))
 */
export class KeyedTurns {
  private readonly held = new Map<string, Promise<void>>()

  async run<T>(keys: readonly string[], work: () => Promise<T>): Promise<T> {
    for (;;) {
      const busy = keys.flatMap((key) => this.held.get(key) ?? [])
      if (busy.length === 0) break
      await Promise.allSettled(busy)
    }
    let done!: () => void
    const turn = new Promise<void>((resolve) => (done = resolve))
    for (const key of keys) this.held.set(key, turn)
    try {
      return await work()
    } finally {
      for (const key of keys) if (this.held.get(key) === turn) this.held.delete(key)
      done()
    }
  }
}
