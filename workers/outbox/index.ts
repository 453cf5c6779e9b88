/** Extends the life of the invocation until the promise settles (`executionCtx.waitUntil`). */
export type Defer = (work: Promise<unknown>) => void

export interface OutboxOptions<Sink, Item> {
  /** What the items are, for the log line of a failed write: e.g. "request records to D1". */
  what: string
  /** Written at once when this many are waiting. */
  maxItems: number
  /** Otherwise written this long after the first of them. */
  flushAfterMs: number
  write: (sink: Sink, items: Item[]) => Promise<void>
}

/**
 * Items waiting for a sink (D1, a queue), shared by the requests one isolate serves: a request adds its items and
 * returns; they are written together once `maxItems` are waiting or `flushAfterMs` after the first of them, always
 * inside some request's `waitUntil`, so no item waits on a request that may never come. One write per request cost
 * more CPU than the rest of `/score` (BENCHMARKS.md, issue 2).
 * @example const jobs = new Outbox({ what: 'analysis jobs', maxItems: 64, flushAfterMs: 100, write: sendAnalysisJobs })
 */
export class Outbox<Sink, Item> {
  private waiting: Item[] = []
  private sink: Sink | undefined
  private scheduled = false

  constructor(private readonly options: OutboxOptions<Sink, Item>) {}

  /**
   * Queues one item for `sink`; `defer` keeps the invocation alive until it is written.
   * @example jobs.add(env.ANALYSIS_QUEUE, job, (work) => c.executionCtx.waitUntil(work))
   */
  add(sink: Sink, item: Item, defer: Defer): void {
    this.sink = sink
    this.waiting.push(item)
    if (this.waiting.length >= this.options.maxItems) {
      defer(this.flush())
    } else if (!this.scheduled) {
      this.scheduled = true
      defer(new Promise((resolve) => setTimeout(resolve, this.options.flushAfterMs)).then(() => this.flush()))
    }
  }

  /** Writes everything waiting now. Never throws: a failed write is logged with what it lost. */
  async flush(): Promise<void> {
    this.scheduled = false
    const items = this.waiting
    const sink = this.sink
    this.waiting = []
    if (sink === undefined || items.length === 0) return
    try {
      await this.options.write(sink, items)
    } catch (error) {
      console.error(`could not write ${items.length} ${this.options.what}`, error)
    }
  }
}
