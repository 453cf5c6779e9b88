import type { RunConfig } from '../../src/schemas/run-config.ts'
import type { ScoreTally } from '../../src/scoring/tally.ts'
import type { CloseNotice, CoordinatorReply, ShardReport } from '../contracts.ts'
import type { IdleGap } from './idle-gap.ts'
import type { StepLifecycle } from './lifecycle.ts'
import type { LlmStats } from './llm-stats.ts'
import type { StepRows } from './step-rows.ts'

/** A shard is about to record a rollout of a step it has not taken part in, or of a later trainer step. */
export interface Announce {
  instanceId: string
  shard: number
  /** The shard's current step, -1 when it has none. */
  shardStep: number
  /** The highest `metadata.current_step` of the rollouts it is about to record, when they carry one. */
  trainerStep?: number
  /** The newest rubric version the shard knows of. */
  newestVersion: number
}

/**
 * What the ledger shards tell the coordinator (announces and batched reports of their tallies and LLM calls), and
 * what it answers: the collecting step, the closes a shard has missed, and the idle gap's deadline. A report that
 * brings the step to `rollouts_per_step`, or an announce of a later trainer step, closes it.
 * @example const reply = await reports.report(config, { instanceId: 'global', shard: 3, step: 0, tally, llm: [] })
 */
export class ShardReports {
  constructor(
    private readonly rows: StepRows,
    private readonly parts: { lifecycle: StepLifecycle; idle: IdleGap; llm: LlmStats },
  ) {}

  /** Registers the shard in the collecting step, closing that step first on a later trainer step. */
  async announce(config: RunConfig, announce: Announce): Promise<CoordinatorReply> {
    const { instanceId, shard, shardStep, trainerStep, newestVersion } = announce
    this.parts.lifecycle.closeIfIdle(config)
    let step = this.rows.openCollecting()
    if (trainerStep !== undefined && config.rollouts_per_step === null && config.close_on_step_advance) {
      const held = this.rows.step(step)?.trainer_step ?? null
      if (held !== null && trainerStep > held && this.rows.hasShards(step)) {
        this.parts.lifecycle.close(step, 'step_advance')
        step = this.rows.openCollecting()
      }
      this.rows.noteTrainerStep(step, trainerStep)
    }
    const closes = shardStep < 0 ? [] : this.missedCloses(instanceId, shard, shardStep)
    const now = Date.now()
    const version = this.rows.pinnedVersion(step, instanceId, newestVersion)
    this.rows.announceShard(step, instanceId, shard, version, now)
    await this.parts.idle.noteRollouts(config, now)
    return { step, closes, version, ...this.parts.idle.hint(config) }
  }

  /** Takes a shard's batch; the step closes once the shards' counts reach `rollouts_per_step`. */
  async report(config: RunConfig, report: ShardReport): Promise<CoordinatorReply> {
    this.parts.lifecycle.closeIfIdle(config)
    const collecting = this.rows.openCollecting()
    this.parts.llm.add(report.step, report.llm)
    // A shard takes part in a step by announcing itself or by reporting rollouts in it, never by reporting none.
    const known = report.step === collecting ? this.rows.shard(report.step, report.instanceId, report.shard) : undefined
    if (report.step === collecting && (report.tally.rollouts > 0 || known)) {
      // Only new rollouts restart the idle gap: a shard repeating its tally (a retried report) is not the trainer.
      const before = known ? (JSON.parse(known.tally) as ScoreTally).rollouts : 0
      const arrived = report.tally.rollouts > before ? Date.now() : 0
      this.rows.upsertShard(report.step, report.instanceId, report.shard, report.tally, arrived)
      if (arrived) await this.parts.idle.noteRollouts(config, arrived)
      if (config.rollouts_per_step !== null)
        this.parts.lifecycle.closeByCount(config.rollouts_per_step, {
          instanceId: report.instanceId,
          shard: report.shard,
        })
    }
    return {
      step: this.rows.collecting(),
      closes: this.missedCloses(report.instanceId, report.shard, report.step),
      ...this.parts.idle.hint(config),
    }
  }

  /**
   * Closed steps from `fromStep` (the shard's step) on: each with what the shard keeps of it. A shard ignores a close
   * it has applied; a step the coordinator never saw the shard in keeps none of its rollouts (they were not counted
   * there, so they move on).
   */
  private missedCloses(instanceId: string, shard: number, fromStep: number): CloseNotice[] {
    const collecting = this.rows.collecting()
    if (fromStep >= collecting) return []
    const keeps = new Map(
      this.rows.shardKeeps(instanceId, shard, fromStep, collecting).map((row) => [row.step, row.keep]),
    )
    const notices: CloseNotice[] = []
    for (let step = fromStep; step < collecting; step++)
      notices.push({ step, keep: keeps.has(step) ? keeps.get(step)! : 0 })
    return notices
  }
}
