/** How long past its time a stored alarm may be before it is no longer trusted to run (it is set again). */
const STALE_ALARM_MS = 5_000

/**
 * One Durable Object's alarm, the one rule every object follows: run by the earliest time anything asked for, never
 * pushed back, and no setAlarm (a billed row write) when one is already due by then. While the handler runs, storage
 * still reports the alarm that is running, which is gone once the handler returns: `handle` makes it not count.
 * @example const alarm = new Alarm(ctx.storage); await alarm.by(Date.now() + 1_000)
 * @example override async alarm() { await this.alarm.handle(() => this.work()) }
 */
export class Alarm {
  /** While the handler runs: the alarm set since it began, if any. */
  private running: { setFor: number | null } | undefined

  constructor(private readonly storage: DurableObjectStorage) {}

  /** An alarm at `at` unless one is already due by then. */
  async by(at: number): Promise<void> {
    const running = this.running
    const pending = running ? running.setFor : await this.storage.getAlarm()
    // A stored alarm long past its time that never ran is not one to rely on.
    const stale = !running && pending !== null && pending < Date.now() - STALE_ALARM_MS
    if (pending !== null && pending <= at && !stale) return
    if (running) running.setFor = at
    await this.storage.setAlarm(at)
  }

  /** Runs the object's alarm handler, with the alarm that woke it counted as gone. */
  async handle(handler: () => Promise<void>): Promise<void> {
    this.running = { setFor: null }
    try {
      await handler()
    } finally {
      this.running = undefined
    }
  }
}
