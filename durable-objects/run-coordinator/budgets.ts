import { type BudgetRefusal, instanceBudgetRefusal } from '../../src/budgets/index.ts'
import type { RunConfig } from '../../src/schemas/run-config.ts'
import { COORDINATOR_SQL } from './statements.ts'

/**
 * `budgets.instances_per_step`: an instance new to a step is admitted while the step holds fewer instances than the
 * budget. Checked where a shard registers in a step (its announce), so it costs the hot path nothing: a shard
 * announces once per step, and an instance already in the step reads one row. The collecting step's count is read once
 * and then kept as instances are admitted.
 * @example const refused = instances.admit(config, step, 'prompt-17') // undefined, or the refusal to answer
 */
export class InstanceBudget {
  private counted: { step: number; instances: number } | undefined

  constructor(private readonly sql: SqlStorage) {}

  /** Undefined when the instance takes part in `step` (already, or admitted now); else the refusal. */
  admit(config: RunConfig, step: number, instanceId: string): BudgetRefusal | undefined {
    if (config.rubrics_mode === 'global') return undefined
    if (this.sql.exec(COORDINATOR_SQL.instanceInStep, step, instanceId).toArray().length > 0) return undefined
    if (this.counted?.step !== step)
      this.counted = { step, instances: this.sql.exec<{ n: number }>(COORDINATOR_SQL.stepInstanceCount, step).one().n }
    if (this.counted.instances >= config.budgets.instances_per_step) return instanceBudgetRefusal(config.budgets, step)
    this.counted.instances++
    return undefined
  }
}

/**
 * `budgets.updates_per_window`: the step updates started within the last `budgets.update_window_s`, one row each
 * (older ones are deleted as new ones start), so the count is a read of at most the budget's rows.
 * @example if (updates.waitS(config) > 0) return refusal; updates.take(config, step)
 */
export class UpdateBudget {
  constructor(private readonly sql: SqlStorage) {}

  /** Seconds until one more step update fits in the window; 0 when one fits now. */
  waitS(config: RunConfig, now = Date.now()): number {
    const { updates_per_window: limit, update_window_s: windowS } = config.budgets
    const { n, oldest } = this.sql
      .exec<{ n: number; oldest: number | null }>(COORDINATOR_SQL.updateStartsSince, now - windowS * 1_000)
      .one()
    if (n < limit || oldest === null) return 0
    return Math.max(1, Math.ceil((oldest + windowS * 1_000 - now) / 1_000))
  }

  /** Counts the update of `step` as started at `now`; the starts that left the window are forgotten. */
  take(config: RunConfig, step: number, now = Date.now()): void {
    this.sql.exec(COORDINATOR_SQL.forgetUpdateStarts, now - config.budgets.update_window_s * 1_000)
    this.sql.exec(COORDINATOR_SQL.addUpdateStart, now, step)
  }
}
