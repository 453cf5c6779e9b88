import type { RunConfig } from '../../src/schemas/run-config.ts'
import type { ScoreTally } from '../../src/scoring/tally.ts'
import type { BudgetRefusal } from '../../src/budgets/index.ts'
import type { Announce, CloseNotice, CoordinatorReply, ShardReport } from '../contracts.ts'
import type { InstanceBudget } from './budgets.ts'
import type { IdleGap } from './idle-gap.ts'
import type { StepLifecycle } from './lifecycle.ts'
import type { Leases } from './leases.ts'
import type { StepRows } from './step-rows.ts'

/**
 * What the ledger shards tell the coordinator (announces, which place rollouts, and batched reports of their tallies),
 * and what it answers: the collecting step, the closes a shard has missed, and the idle gap's deadline. An announce of
 * a later trainer step closes the step; with `rollouts_per_step`, an announce asks for a lease of seats and the last
 * seat taken closes the step (`Leases`). An announce is where an instance joins a step, so it is where
 * `budgets.instances_per_step` is kept (`InstanceBudget`).
 * @example const reply = await reports.report(config, { instanceId: 'global', shard: 3, step: 0, tally })
 */
export class ShardReports {
  constructor(
    private readonly rows: StepRows,
    private readonly parts: { lifecycle: StepLifecycle; idle: IdleGap; leases: Leases; instances: InstanceBudget },
  ) {}

  /**
   * Registers the shard in the collecting step (closing that step first on a later trainer step) and answers its
   * rubric version: each rollout judged on it is recorded there. With `rollouts_per_step` the shard leases seats
   * instead (`Leases`). An instance new to the step past `budgets.instances_per_step` is refused: nothing is
   * registered.
   */
  async announce(config: RunConfig, announce: Announce): Promise<CoordinatorReply> {
    const { instanceId, shard, shardStep, trainerStep, newestVersion } = announce
    if (config.rollouts_per_step !== null) return this.lease(config, announce)
    this.parts.lifecycle.closeIfIdle(config)
    let step = this.rows.openCollecting()
    if (trainerStep !== undefined && config.close_on_step_advance) {
      const held = this.rows.step(step)?.trainer_step ?? null
      if (held !== null && trainerStep > held && this.rows.hasShards(step)) {
        this.parts.lifecycle.close(config, step, 'step_advance')
        step = this.rows.openCollecting()
      }
    }
    // After a later trainer step's close: the first instances of a new step are not refused for the old one's.
    const refused = this.parts.instances.admit(config, step, instanceId)
    if (refused) return this.refusal(config, shardStep, refused)
    if (trainerStep !== undefined && config.close_on_step_advance) this.rows.noteTrainerStep(step, trainerStep)
    const now = Date.now()
    const version = this.rows.pinnedVersion(step, instanceId, newestVersion)
    this.rows.announceShard(step, instanceId, shard, version, now)
    await this.parts.idle.noteRollouts(config, now)
    return { step, closes: this.missedCloses(shardStep), version, counted: false, ...this.parts.idle.hint(config) }
  }

  /** Takes a shard's tally of its current step: what the timeline draws and the idle gap is measured from. */
  async report(config: RunConfig, report: ShardReport): Promise<CoordinatorReply> {
    this.parts.lifecycle.closeIfIdle(config)
    if (report.taken !== undefined && config.rollouts_per_step !== null)
      await this.parts.leases.noteTaken(config, report.step, report.instanceId, report.shard, report.taken)
    const collecting = this.rows.openCollecting()
    // A shard takes part in a step by announcing itself or by reporting rollouts in it, never by reporting none.
    const known = report.step === collecting ? this.rows.shard(report.step, report.instanceId, report.shard) : undefined
    if (report.step === collecting && (report.tally.rollouts > 0 || known)) {
      // Only new rollouts restart the idle gap: a shard repeating its tally (a retried report) is not the trainer.
      const before = known ? (JSON.parse(known.tally) as ScoreTally).rollouts : 0
      const arrived = report.tally.rollouts > before ? Date.now() : 0
      this.rows.upsertShard(report.step, report.instanceId, report.shard, report.tally, arrived)
      if (arrived) await this.parts.idle.noteRollouts(config, arrived)
      await this.parts.idle.noteJudgement(config, report.tally.longest_judgement_ms)
    }
    return {
      step: this.rows.collecting(),
      closes: this.missedCloses(report.step),
      ...this.parts.idle.hint(config),
    }
  }

  /** A counted step's answer to an announce: the shard's lease of seats (`Leases.ask`). */
  private async lease(config: RunConfig, announce: Announce): Promise<CoordinatorReply> {
    const lease = await this.parts.leases.ask(config, announce)
    if (lease.refused) return this.refusal(config, announce.shardStep, lease.refused)
    const { step, version, leased } = lease
    return { step, closes: this.missedCloses(announce.shardStep), version, leased, counted: true }
  }

  /** The answer to a refused announce: where the run stands, and why nothing was registered. */
  private refusal(config: RunConfig, shardStep: number, refused: BudgetRefusal): CoordinatorReply {
    return {
      step: this.rows.collecting(),
      closes: this.missedCloses(shardStep),
      refused,
      ...this.parts.idle.hint(config),
    }
  }

  /** Closed steps from `fromStep` (the shard's step; -1: it has none) on: a shard ignores a close it has applied. */
  private missedCloses(fromStep: number): CloseNotice[] {
    if (fromStep < 0) return []
    const collecting = this.rows.collecting()
    const notices: CloseNotice[] = []
    for (let step = Math.max(0, fromStep); step < collecting; step++) notices.push({ step })
    return notices
  }
}
