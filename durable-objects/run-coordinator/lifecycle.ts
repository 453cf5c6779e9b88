import type { RunConfig } from '../../src/schemas/run-config.ts'
import type { StepUpdateOutcome } from '../../src/schemas/status.ts'
import type { Alarm } from '../alarm.ts'
import type { LlmStat } from '../contracts.ts'
import type { MetaStore } from '../meta-store.ts'
import type { UpdateBudget } from './budgets.ts'
import type { IdleGap } from './idle-gap.ts'
import type { LlmStats } from './llm-stats.ts'
import type { StepRows } from './step-rows.ts'
import { COORDINATOR_SQL } from './statements.ts'
import { type CloseReason, DETAILED_STEPS, tallyOf } from './tables.ts'
import type { UpdateWaiters } from './update-waiters.ts'

/** The seats one shard holds in a step closed by count. */
type ShardKeep = { instanceId: string; shard: number; keep: number }

/**
 * A step's way through the run: `collecting` rollouts, `closing` (it takes no more; its shards are being told),
 * `updating` (each touched instance's update runs), `updated`. Every move is one transaction of the coordinator's
 * storage; telling the shards and sending the updates are `CloseNotices`' and `StepJobs`'.
 * @example lifecycle.closeIfIdle(config); lifecycle.close(config, rows.collecting(), 'complete')
 */
export class StepLifecycle {
  private readonly sql: SqlStorage

  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly meta: MetaStore,
    private readonly rows: StepRows,
    private readonly parts: {
      idle: IdleGap
      llm: LlmStats
      waiters: UpdateWaiters
      wakeUp: Alarm
      updates: UpdateBudget
    },
  ) {
    this.sql = storage.sql
  }

  /**
   * Stops `step` taking rollouts; after a count close `keeps` says how many seats each shard holds in it. The shards
   * are told by the alarm (or by `/complete` itself). The close starts a step update, counted against
   * `budgets.updates_per_window`; past it the step closes with its update skipped (its rollouts and scores stay), so an
   * automatic close never refuses a rollout. `/complete` asks `UpdateBudget.waitS` first and refuses instead.
   */
  close(config: RunConfig, step: number, reason: CloseReason, keeps?: readonly ShardKeep[]): void {
    const now = Date.now()
    const skipped = this.parts.updates.waitS(config, now) > 0 ? 'budgets.updates_per_window' : null
    this.storage.transactionSync(() => {
      const closed = this.sql.exec(COORDINATOR_SQL.closeStep, new Date(now).toISOString(), reason, skipped, step)
      if (closed.rowsWritten > 0 && !skipped) this.parts.updates.take(config, step, now)
      for (const { instanceId, shard, keep } of keeps ?? []) {
        this.sql.exec(COORDINATOR_SQL.setShardKeep, keep, step, instanceId, shard)
      }
      this.meta.set('collecting_step', step + 1)
      this.rows.openCollecting()
    })
    this.parts.idle.restart()
    void this.parts.wakeUp.by(Date.now())
  }

  /**
   * Closes the collecting step when its idle gap has passed. The alarm does it on time; every report, announce and
   * status read does it too, so a late or lost alarm can neither hold a finished step open nor let the next burst's
   * rollouts join it.
   */
  closeIfIdle(config: RunConfig): void {
    const deadline = this.parts.idle.deadline(config)
    if (deadline !== undefined && Date.now() >= deadline) this.close(config, this.rows.collecting(), 'idle')
  }

  /** Every shard of `step` knows it closed: each instance it touched gets its update (none touched: it is done). */
  startUpdates(step: number): void {
    const byInstance = new Map<string, { rollouts: number; version: number }>()
    for (const row of this.rows.shards(step)) {
      const tally = tallyOf(row)
      const sum = byInstance.get(row.instance_id) ?? { rollouts: 0, version: 1 }
      byInstance.set(row.instance_id, {
        rollouts: sum.rollouts + tally.rollouts,
        version: Math.max(sum.version, tally.max_version ?? 1),
      })
    }
    const touched = [...byInstance].filter(([, sum]) => sum.rollouts > 0)
    this.storage.transactionSync(() => {
      this.sql.exec(COORDINATOR_SQL.markUpdating, step)
      for (const [instanceId, { rollouts, version }] of touched) {
        this.sql.exec(COORDINATOR_SQL.addStepInstance, step, instanceId, version, rollouts)
        this.rows.noteVersion(version)
      }
    })
    if (touched.length === 0) this.finish(step)
  }

  /**
   * An instance's update of `step` is done, with its LLM calls; the step is updated when every touched instance's is.
   */
  async instanceUpdated(
    step: number,
    instanceId: string,
    outcome: StepUpdateOutcome,
    llm: readonly LlmStat[],
  ): Promise<{ stepUpdated: boolean }> {
    const changed = this.sql.exec(
      COORDINATOR_SQL.markInstanceUpdated,
      outcome.rubric_version,
      JSON.stringify(outcome),
      step,
      instanceId,
    ).rowsWritten
    if (changed > 0) {
      this.parts.llm.add(step, llm)
      this.sql.exec(COORDINATOR_SQL.commitInstance, instanceId, outcome.rubric_version, outcome.rollouts, step)
    }
    this.rows.noteVersion(outcome.rubric_version)
    const next = this.sql.exec<{ n: number }>(COORDINATOR_SQL.laterPending, instanceId, step).one().n
    // The instance's next step update was held back for this one: send it now, not at the watchdog.
    if (changed > 0 && next > 0) await this.parts.wakeUp.by(Date.now())
    const remaining = this.sql.exec<{ n: number }>(COORDINATOR_SQL.stepPending, step).one().n
    if (remaining === 0) this.finish(step)
    return { stepUpdated: remaining === 0 }
  }

  /** `step` is updated: its tally is summed once and kept, and its waiters answer. */
  private finish(step: number): void {
    const row = this.rows.step(step)
    if (!row || row.status === 'updated') return
    const tally = this.rows.tally(row)
    this.storage.transactionSync(() => {
      this.sql.exec(COORDINATOR_SQL.markUpdated, new Date().toISOString(), JSON.stringify(tally), step)
      this.meta.set('updated_rollouts', this.rows.updatedRollouts() + tally.rollouts)
    })
    this.forgetOldDetail(step)
    this.parts.waiters.release(step)
  }

  /**
   * Updated steps `DETAILED_STEPS` before `step` leave the coordinator: their shard and instance rows, their per-step
   * LLM sums (folded into step -1's) and then their own row, so `steps` stays bounded however long the run. Nothing
   * reads them: readers want the newest steps, and a late report or announce of such a step writes only to the
   * collecting one. A step not yet updated keeps its row whatever its age.
   */
  private forgetOldDetail(step: number): void {
    const oldest = step - DETAILED_STEPS
    if (oldest < 0) return
    this.storage.transactionSync(() => {
      // Before the steps' rows: it finds the updated steps by them.
      this.sql.exec(COORDINATOR_SQL.forgetShardsThrough, oldest)
      this.sql.exec(COORDINATOR_SQL.forgetInstancesThrough, oldest)
      this.parts.llm.foldThrough(oldest)
      this.sql.exec(COORDINATOR_SQL.forgetStepsThrough, oldest)
    })
  }
}
