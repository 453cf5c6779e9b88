import type { RunConfig } from '../../src/schemas/run-config.ts'
import type { Alarm } from '../alarm.ts'
import type { CloseNotices } from './close-notices.ts'
import type { IdleGap } from './idle-gap.ts'
import type { Leases } from './leases.ts'
import type { StepLifecycle } from './lifecycle.ts'
import type { StepJobs } from './step-jobs.ts'
import type { StepRows } from './step-rows.ts'

/** How often the alarm looks for closes not yet applied and step jobs that never reported back. */
const STEP_WATCHDOG_MS = 15_000

/**
 * What the coordinator's alarm does: closes an idle step on time, calls back the free seats of a counted step whose
 * every seat is leased (closing it when all are taken), tells the shards of closing steps, starts and re-sends the
 * instances' updates, and sets the next alarm while any step is unfinished. Safe to run again: closes
 * and step jobs are idempotent.
 * @example override async alarm() { await this.wakeUp.handle(async () => this.watchdog.run(await this.runConfig())) }
 */
export class Watchdog {
  constructor(
    private readonly rows: StepRows,
    private readonly parts: {
      idle: IdleGap
      lifecycle: StepLifecycle
      notices: CloseNotices
      jobs: StepJobs
      leases: Leases
      wakeUp: Alarm
    },
  ) {}

  async run(config: RunConfig): Promise<void> {
    this.parts.lifecycle.closeIfIdle(config)
    await this.parts.leases.sweep(config)
    await this.parts.notices.tellShards()
    const now = Date.now()
    await this.parts.jobs.sendDue(now)
    const unfinished = this.rows.oldestUnfinished() !== undefined
    const next = Math.min(unfinished ? now + STEP_WATCHDOG_MS : Infinity, this.parts.idle.deadline(config) ?? Infinity)
    // A close during this run has set an earlier alarm: the watchdog must not push it back.
    if (next !== Infinity) await this.parts.wakeUp.by(next)
  }

  /**
   * An idle close and an unfinished step's next look are due by the alarm; a read re-arms it should it ever have been
   * lost (no write when one is set).
   */
  async keepArmed(config: RunConfig): Promise<void> {
    const idleDeadline = this.parts.idle.deadline(config)
    if (idleDeadline !== undefined) await this.parts.wakeUp.by(idleDeadline)
    if (this.rows.oldestUnfinished() !== undefined) await this.parts.wakeUp.by(Date.now() + STEP_WATCHDOG_MS)
  }
}
