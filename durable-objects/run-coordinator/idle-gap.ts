import type { RunConfig } from '../../src/schemas/run-config.ts'
import type { Alarm } from '../alarm.ts'
import type { StepRows } from './step-rows.ts'
import { COORDINATOR_SQL } from './statements.ts'

/** The most the idle gap allows for a rollout still being judged, however slow the judge was. */
const JUDGEMENT_ALLOWANCE_MAX_MS = 600_000

/**
 * The collecting step's idle gap (`close_after_idle_s`): when its rollouts last arrived and when it closes for want of
 * more. The gap counts from when a rollout sent just after the last one would have been judged: the last record plus
 * the longest a rollout of this step or the one before took from its request to its record (a slow judge's rollout
 * in flight is not cut off into the next step). Closing is `StepLifecycle.closeIfIdle`'s; this keeps the time and
 * the alarm by it.
 * @example await idle.noteRollouts(config, Date.now()); idle.deadline(config) // the time the step closes if idle
 */
export class IdleGap {
  /**
   * When rollouts of the collecting step last arrived: read from storage once (`step_shards.last_at`, which survives
   * an eviction), then kept here as the shards bring more.
   */
  private lastRolloutAt: number | undefined
  /**
   * The longest judgement (`ScoreTally.longest_judgement_ms`) of the collecting step and of the step before: read from
   * the stored tallies once, then kept here as reports bring more.
   */
  private longest: { collecting: number; before: number } | undefined

  constructor(
    private readonly sql: SqlStorage,
    private readonly rows: StepRows,
    private readonly wakeUp: Alarm,
  ) {}

  /**
   * Rollouts of the collecting step arrived: the idle gap starts again, and an alarm is pending by its end (an earlier
   * one looks again and moves on; the gap only ever ends later).
   */
  async noteRollouts(config: RunConfig, at: number): Promise<void> {
    this.lastRolloutAt = Math.max(at, this.lastRolloutAt ?? 0)
    await this.rearm(config)
  }

  /** A shard's report of its longest judgement in the collecting step: the gap allows for one that long. */
  async noteJudgement(config: RunConfig, longestMs: number | undefined): Promise<void> {
    const longest = this.longestJudgements()
    if (!longestMs || longestMs <= longest.collecting) return
    longest.collecting = longestMs
    await this.rearm(config)
  }

  private async rearm(config: RunConfig): Promise<void> {
    const deadline = this.deadline(config)
    if (deadline !== undefined) await this.wakeUp.by(deadline)
  }

  /** The collecting step closed: the next one's gap starts with its first rollout, allowing for the closed one's. */
  restart(): void {
    this.lastRolloutAt = undefined
    this.longest = undefined
  }

  /** When the collecting step closes for want of rollouts, if the run closes by idle gap and the step has any. */
  deadline(config: RunConfig): number | undefined {
    if (config.rollouts_per_step !== null || config.close_after_idle_s === null) return undefined
    if (!this.rows.hasShards(this.rows.collecting())) return undefined
    return this.lastRolloutTime() + config.close_after_idle_s * 1_000 + this.allowanceMs()
  }

  /** What the gap adds for a rollout still being judged: the longest judgement of this step or the one before. */
  allowanceMs(): number {
    const { collecting, before } = this.longestJudgements()
    return Math.min(JUDGEMENT_ALLOWANCE_MAX_MS, Math.max(collecting, before))
  }

  /**
   * What a shard needs to know of the idle gap: when the collecting step closes if nothing else arrives. A shard asks
   * again before it records a rollout past that time, so a rollout after the gap never joins the step it ended.
   */
  hint(config: RunConfig): { idleDeadline?: number } {
    const deadline = this.deadline(config)
    return deadline === undefined ? {} : { idleDeadline: deadline }
  }

  /** When rollouts of the collecting step last arrived, from storage after a restart. */
  lastRolloutTime(): number {
    if (this.lastRolloutAt !== undefined) return this.lastRolloutAt
    const stored = this.sql.exec<{ at: number | null }>(COORDINATOR_SQL.lastRolloutAt, this.rows.collecting()).one().at
    // Storage from before the arrival times were kept has none: the gap starts at this wake.
    return (this.lastRolloutAt = stored ? stored : Date.now())
  }

  private longestJudgements(): { collecting: number; before: number } {
    if (this.longest) return this.longest
    const step = this.rows.collecting()
    const longestIn = (of: number) =>
      this.sql.exec<{ ms: number | null }>(COORDINATOR_SQL.longestJudgement, of).one().ms ?? 0
    return (this.longest = { collecting: longestIn(step), before: step > 0 ? longestIn(step - 1) : 0 })
  }
}
