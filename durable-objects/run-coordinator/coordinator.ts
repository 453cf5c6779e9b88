import { DurableObject } from 'cloudflare:workers'
import { type BudgetRefusal, updateBudgetRefusal } from '../../src/budgets/index.ts'
import type { RunConfig } from '../../src/schemas/run-config.ts'
import type { RubricStatus, StepUpdateOutcome, UpdateProgress } from '../../src/schemas/status.ts'
import { Alarm } from '../alarm.ts'
import type { Announce, CoordinatorReply, LlmStat, ShardReport } from '../contracts.ts'
import { objectName } from '../identity.ts'
import { MetaStore } from '../meta-store.ts'
import { coordinatorName, runIdOf } from '../names.ts'
import { loadRunConfig } from '../run-config.ts'
import { applySchema } from '../schema.ts'
import { InstanceBudget, UpdateBudget } from './budgets.ts'
import { CloseNotices } from './close-notices.ts'
import { IdleGap } from './idle-gap.ts'
import { StepLifecycle } from './lifecycle.ts'
import { Leases } from './leases.ts'
import { LlmStats } from './llm-stats.ts'
import { RunReadings, type StepTimelineEntry } from './readings.ts'
import { ShardReports } from './shard-reports.ts'
import { StepJobs } from './step-jobs.ts'
import { StepRows } from './step-rows.ts'
import { COORDINATOR_TABLES, DETAILED_STEPS } from './tables.ts'
import { UpdateWaiters } from './update-waiters.ts'
import { Watchdog } from './watchdog.ts'

/**
 * One per run: which step the run is collecting, the ledger shards' tallies of each step (they report in batches,
 * never per score), when a step closes (`/complete`, or `rollouts_per_step` reached: then every shard keeps exactly
 * its share of the first N and moves the rest on), the per-step aggregates the dashboard draws, and the waiters of
 * `/rubric_status/wait`. A closed step's updates run from an alarm, never inside a request. The class is the object's
 * one RPC surface; each concern is a module of this folder that it composes over the same storage.
 * @example const status = await env.RUN_COORDINATOR.getByName(coordinatorName(runId)).status()
 */
export class RunCoordinator extends DurableObject<Cloudflare.Env> {
  private readonly wakeUp: Alarm
  private readonly rows: StepRows
  private readonly lifecycle: StepLifecycle
  private readonly reports: ShardReports
  private readonly notices: CloseNotices
  private readonly waiters: UpdateWaiters
  private readonly llm: LlmStats
  private readonly readings: RunReadings
  private readonly watchdog: Watchdog
  private readonly jobs: StepJobs
  private readonly meta: MetaStore
  private readonly updates: UpdateBudget
  private config: RunConfig | undefined

  constructor(ctx: DurableObjectState, env: Cloudflare.Env) {
    super(ctx, env)
    const sql = ctx.storage.sql
    const runId = () => this.runId
    this.meta = new MetaStore(sql)
    applySchema(sql, COORDINATOR_TABLES)
    const wakeUp = (this.wakeUp = new Alarm(ctx.storage))
    const rows = (this.rows = new StepRows(sql, this.meta))
    const idle = new IdleGap(sql, rows, wakeUp)
    const llm = (this.llm = new LlmStats(sql))
    const waiters = (this.waiters = new UpdateWaiters(rows))
    const updates = (this.updates = new UpdateBudget(sql))
    const lifecycle = (this.lifecycle = new StepLifecycle(ctx.storage, this.meta, rows, {
      idle,
      llm,
      waiters,
      wakeUp,
      updates,
    }))
    const instances = new InstanceBudget(sql)
    const leases = new Leases(env, runId, rows, { lifecycle, instances, meta: this.meta, wakeUp })
    this.reports = new ShardReports(rows, { lifecycle, idle, leases, instances })
    const notices = (this.notices = new CloseNotices(env, runId, rows, { lifecycle, wakeUp }))
    const jobs = (this.jobs = new StepJobs(sql, env, runId))
    this.watchdog = new Watchdog(rows, { idle, lifecycle, notices, jobs, leases, wakeUp })
    this.readings = new RunReadings(sql, rows, idle)
  }

  /**
   * A ledger shard is about to record rollouts: its first of its step, rollouts of a later trainer step than it has
   * seen in it (closing the collecting step first when that is past every one it holds, `close_on_step_advance`), or,
   * when steps close by count, more than the seats it leased. Registers it in the collecting step and answers with
   * that step, its rubric version, the shard's lease of seats (counted steps) and any close the shard has missed.
   */
  async announce(announce: Announce): Promise<CoordinatorReply> {
    return this.reports.announce(await this.runConfig(), announce)
  }

  /** A shard's batch: its current step's tally (absolute). Answers with the collecting step and the closes to apply. */
  async report(report: ShardReport): Promise<CoordinatorReply> {
    return this.reports.report(await this.runConfig(), report)
  }

  /**
   * The trainer's "step done": closes the collecting step, or `noop` when the run closes steps by count. Nothing closes
   * and `refused` says why (the step keeps collecting) when the update it would start is past
   * `budgets.updates_per_window`.
   */
  async complete(): Promise<{ status: 'complete' | 'noop'; step: number; closed: boolean; refused?: BudgetRefusal }> {
    const config = await this.runConfig()
    const step = this.rows.collecting()
    if (config.rollouts_per_step !== null) return { status: 'noop', step, closed: false }
    if (!this.rows.hasShards(step)) return { status: 'complete', step, closed: false }
    const waitS = this.updates.waitS(config)
    if (waitS > 0)
      return { status: 'complete', step, closed: false, refused: updateBudgetRefusal(config.budgets, waitS) }
    this.lifecycle.close(config, step, 'complete')
    // Every shard learns of the close before the answer, so a rollout sent after /complete belongs to the next step.
    await this.notices.tellShards()
    return { status: 'complete', step, closed: true }
  }

  /** Where `step` stands, without waiting: null when the run keeps no such step. */
  async statusOf(step: number): Promise<RubricStatus | null> {
    return this.rows.step(step) ? this.status(step) : null
  }

  /** Where the run stands (or where `step` stands), without waiting. */
  async status(step?: number): Promise<RubricStatus> {
    const config = await this.runConfig()
    this.lifecycle.closeIfIdle(config)
    await this.watchdog.keepArmed(config)
    return this.readings.status(config, this.runId, step)
  }

  /**
   * Every step of the run that has rollouts or has closed, oldest first (at most the newest `limit`), with its score
   * tally and each touched instance's rollouts and update outcome: the dashboard's timeline and charts. A read only.
   */
  async timeline(limit = DETAILED_STEPS): Promise<StepTimelineEntry[]> {
    return this.readings.timeline(limit)
  }

  /** LLM calls of the run by role, model and outcome, summed over its steps. */
  async llmCalls(): Promise<LlmStat[]> {
    return this.llm.totals()
  }

  /**
   * LLM calls the Worker's isolates made for the run, summed per step (null: the step the run is collecting), as their
   * telemetry hands them over in batches. A batch id seen before (a batch sent again) adds nothing.
   */
  async addLlmCalls(batchId: string, steps: readonly { step: number | null; stats: readonly LlmStat[] }[]) {
    await this.runConfig()
    const collecting = this.rows.collecting()
    this.ctx.storage.transactionSync(() => {
      if (!this.llm.claimBatch(batchId)) return
      for (const { step, stats } of steps) this.llm.add(step ?? collecting, stats)
    })
  }

  /** Every instance that has taken part in the run, with its newest known rubric version. */
  async instances(): Promise<{ instance_id: string; rubric_version: number; rollouts: number }[]> {
    return this.readings.instances()
  }

  /** Rollouts scored (distinct per step) and the last step with any, for the runs index. */
  async activity(): Promise<{ scores: number; last_step: number | null }> {
    return this.readings.activity()
  }

  /**
   * Waits until the step the trainer is waiting on has finished updating: the oldest closed step not yet updated,
   * else the collecting step if any shard has taken rollouts in it. Returns at once when nothing is pending.
   */
  async waitForUpdate(timeoutMs: number): Promise<{ done: boolean; status: RubricStatus }> {
    const target = this.waiters.target()
    const done = target === undefined ? true : await this.waiters.wait(target, timeoutMs)
    // Once done, the step waited on is the one to describe, though another may be collecting by now.
    return { done, status: await this.status(done ? target : undefined) }
  }

  /**
   * A running step job says it is still working on `instanceId`'s update of `step`, so it is not sent again meanwhile,
   * and how far it has got (what `/rubric_status` shows until the update is done).
   * @example await coordinator.stepJobAlive(3, 'global', { phase: 'analysing', analyses: { selected: 8, done: 2, … } })
   */
  async stepJobAlive(step: number, instanceId: string, progress?: UpdateProgress): Promise<void> {
    this.jobs.alive(step, instanceId, Date.now(), progress)
  }

  /**
   * A step job that may have a twin at work (it was sent again, or waited long in the queue) asks whether to run:
   * false when the instance's update of `step` is done or another message's run of it said it is at work lately.
   * `messageId`: the queue message, whose own retries may go on.
   * @example if (!(await coordinator.claimStepJob(3, 'global', message.id))) return // a twin is at work
   */
  async claimStepJob(step: number, instanceId: string, messageId: string): Promise<boolean> {
    return this.jobs.claim(step, instanceId, messageId, Date.now())
  }

  /**
   * An instance reports its step update done, with its LLM calls; the step is updated when every touched instance has.
   */
  async instanceUpdated(
    step: number,
    instanceId: string,
    outcome: StepUpdateOutcome,
    llm: readonly LlmStat[] = [],
  ): Promise<{ stepUpdated: boolean }> {
    await this.runConfig()
    return this.lifecycle.instanceUpdated(step, instanceId, outcome, llm)
  }

  /**
   * Tells the shards of closing steps, starts the updates of steps whose shards all know, and re-sends step jobs
   * that have not reported back well past their time (a lost message or a reset must not stall a step). Safe to run
   * again: closes and step jobs are idempotent.
   */
  override async alarm(): Promise<void> {
    await this.wakeUp.handle(async () => this.watchdog.run(await this.runConfig()))
  }

  private async runConfig(): Promise<RunConfig> {
    if (this.config) return this.config
    const config = await loadRunConfig(this.env.DB, this.runId)
    if (!config) throw new Error(`run "${this.runId}" does not exist`)
    return (this.config = config)
  }

  /** The run this coordinates: the name it was reached by. */
  private get runId(): string {
    return runIdOf(
      objectName(this.ctx, this.meta, () => {
        const runId = this.meta.get('run_id')
        return runId && coordinatorName(runId)
      }),
    )
  }
}
