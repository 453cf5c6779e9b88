import { DurableObject } from 'cloudflare:workers'
import { pLimit } from '../../src/llm/index.ts'
import type { RunConfig } from '../../src/schemas/run-config.ts'
import type { RubricStatus, StepStatus, StepUpdateOutcome } from '../../src/schemas/status.ts'
import { emptyTally, mergeTallies, type ScoreTally } from '../../src/scoring/tally.ts'
import { loadRunConfig } from '../run-config.ts'
import type { CloseNotice, CoordinatorReply, LlmStat, ShardReport, StepJob } from '../contracts.ts'
import { MetaStore } from '../meta-store.ts'
import { Alarm } from '../alarm.ts'
import { objectName } from '../identity.ts'
import { coordinatorName, ledgerName, runIdOf } from '../names.ts'
import { applySchema, type TableSchema } from '../schema.ts'
import { Waiters } from '../waiters.ts'

/** How often the alarm looks for closes not yet applied and step jobs that never reported back. */
const STEP_WATCHDOG_MS = 15_000
/** A step job silent this long is sent again. */
const STEP_RESEND_AFTER_MS = 180_000
/** Shards told of a close at once, at most (each is a subrequest of this invocation). */
const CLOSE_FAN_OUT = 32
/**
 * Shards one alarm tells of a close: with the step jobs' sends this keeps the alarm well under the 1,000 subrequests
 * of one invocation however many instances a step touched (a `per_instance` step of 512 prompts needs two alarms).
 */
const CLOSE_CALLS_PER_ALARM = 400
/** Steps whose per-shard and per-instance rows are kept; older steps keep their summary row only. */
const DETAILED_STEPS = 200

/** `closing` is internal: the step stopped taking rollouts and its shards are being told; readers see `updating`. */
type StoredStepStatus = 'collecting' | 'closing' | 'updating' | 'updated'

/** One step as the dashboard's timeline and charts show it. */
export interface StepTimelineEntry {
  step: number
  status: Exclude<StepStatus, 'idle'>
  rollouts: number
  opened_at: string
  closed_at: string | null
  updated_at: string | null
  tally: ScoreTally
  instances: { instance_id: string; rubric_version: number; rollouts: number; update: StepUpdateOutcome | null }[]
}

const COORDINATOR_TABLES: Record<string, TableSchema> = {
  steps: {
    columns: {
      step: 'INTEGER PRIMARY KEY',
      status: 'TEXT NOT NULL',
      opened_at: 'TEXT NOT NULL',
      closed_at: 'TEXT',
      updated_at: 'TEXT',
      // The highest `metadata.current_step` the step's rollouts carried (as the shards announced it), and why it
      // closed.
      trainer_step: 'INTEGER',
      closed_by: 'TEXT',
      // The step's scores summed over its shards, written when the step is updated (its shard rows go some steps
      // later).
      tally: 'TEXT',
    },
  },
  // A shard's tally of a step (as it last reported it) and, once the step closed, how many of its rollouts the step
  // keeps.
  step_shards: {
    columns: {
      step: 'INTEGER NOT NULL',
      instance_id: 'TEXT NOT NULL',
      shard: 'INTEGER NOT NULL',
      tally: 'TEXT NOT NULL',
      keep: 'INTEGER',
      acked: 'INTEGER NOT NULL DEFAULT 0',
      // The rubric version the instance's rollouts of the step are scored on, the same in every row of one step and
      // instance: fixed by the first row (`pinnedVersion`).
      version: 'INTEGER',
      // When the shard last brought new rollouts of the step (ms): the idle gap is measured from the newest.
      last_at: 'INTEGER NOT NULL DEFAULT 0',
    },
    constraints: ['PRIMARY KEY (step, instance_id, shard)'],
    withoutRowid: true,
  },
  step_instances: {
    columns: {
      step: 'INTEGER NOT NULL',
      instance_id: 'TEXT NOT NULL',
      rubric_version: 'INTEGER NOT NULL',
      rollouts: 'INTEGER NOT NULL DEFAULT 0',
      updated: 'INTEGER NOT NULL DEFAULT 0',
      enqueued_at: 'INTEGER',
      outcome: 'TEXT',
    },
    constraints: ['PRIMARY KEY (step, instance_id)'],
    withoutRowid: true,
  },
  instances: {
    columns: {
      instance_id: 'TEXT PRIMARY KEY',
      rubric_version: 'INTEGER NOT NULL',
      rollouts: 'INTEGER NOT NULL',
      last_step: 'INTEGER NOT NULL',
    },
    withoutRowid: true,
  },
  // Step -1 holds the sums of steps older than DETAILED_STEPS.
  llm_stats: {
    columns: {
      step: 'INTEGER NOT NULL',
      role: 'TEXT NOT NULL',
      model: 'TEXT NOT NULL',
      outcome: 'TEXT NOT NULL',
      calls: 'INTEGER NOT NULL',
      latency_ms: 'INTEGER NOT NULL',
      prompt_tokens: 'INTEGER NOT NULL',
      completion_tokens: 'INTEGER NOT NULL',
    },
    constraints: ['PRIMARY KEY (step, role, model, outcome)'],
    withoutRowid: true,
  },
}

/** The step_shards statements written from more than one place, by name. */
export const COORDINATOR_SQL = {
  /** A shard's tally of a step (absolute), registering it there; a confirmed close's row is left as confirmed. */
  upsertShard: `INSERT INTO step_shards (step, instance_id, shard, tally, version, last_at) VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (step, instance_id, shard) DO UPDATE SET tally = excluded.tally,
      last_at = max(last_at, excluded.last_at) WHERE acked = 0`,
  /** A shard about to take rollouts in a step: registered with an empty tally, or its arrival time moved on. */
  announceShard: `INSERT INTO step_shards (step, instance_id, shard, tally, version, last_at) VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (step, instance_id, shard) DO UPDATE SET last_at = max(last_at, excluded.last_at)`,
  pinnedVersion: 'SELECT version FROM step_shards WHERE step = ? AND instance_id = ? AND version IS NOT NULL LIMIT 1',
  committedVersion: 'SELECT rubric_version FROM instances WHERE instance_id = ?',
  lastRolloutAt: 'SELECT max(last_at) AS at FROM step_shards WHERE step = ?',
} as const

type ShardRow = {
  step: number
  instance_id: string
  shard: number
  tally: string
  keep: number | null
  acked: number
  version: number | null
  last_at: number
}
type StepRow = {
  step: number
  status: StoredStepStatus
  opened_at: string
  closed_at: string | null
  updated_at: string | null
  tally: string | null
  trainer_step: number | null
  closed_by: CloseReason | null
}
/**
 * What closed a step: the trainer's /complete, `rollouts_per_step`, a rollout of a later trainer step, or the idle gap.
 */
export type CloseReason = NonNullable<RubricStatus['closed_by']>

/**
 * One per run: which step the run is collecting, the ledger shards' tallies of each step (they report in batches,
 * never per score), when a step closes (`/complete`, or `rollouts_per_step` reached: then every shard keeps exactly
 * its share of the first N and moves the rest on), the per-step aggregates the dashboard draws, and the waiters of
 * `/rubric_status/wait`. A closed step's updates run from an alarm, never inside a request.
 */
export class RunCoordinator extends DurableObject<Cloudflare.Env> {
  private readonly sql: SqlStorage
  private readonly meta: MetaStore
  /** `/rubric_status/wait` requests, by the step they wait for. */
  private readonly waiters = new Waiters<number, boolean>()
  private config: RunConfig | undefined
  /**
   * When rollouts of the collecting step last arrived: read from storage once (`step_shards.last_at`, which survives
   * an eviction), then kept here as the shards bring more.
   */
  private lastRolloutAt: number | undefined
  private readonly wakeUp: Alarm

  constructor(ctx: DurableObjectState, env: Cloudflare.Env) {
    super(ctx, env)
    this.sql = ctx.storage.sql
    this.meta = new MetaStore(this.sql)
    this.wakeUp = new Alarm(ctx.storage)
    applySchema(this.sql, COORDINATOR_TABLES)
  }

  /**
   * A ledger shard is about to record its first rollout of its step (`shardStep`, -1 when it has none), or rollouts of
   * a later trainer step (`trainerStep`, their highest `metadata.current_step`) than it has seen in it: registers it in
   * the collecting step, closing that step first when `trainerStep` is past every one it holds
   * (`close_on_step_advance`), and answers with the collecting step and any close the shard has missed.
   */
  async announce(
    instanceId: string,
    shard: number,
    shardStep: number,
    trainerStep?: number,
    newestVersion = 1,
  ): Promise<CoordinatorReply> {
    const config = await this.runConfig()
    this.closeIfIdle(config)
    let step = this.openCollectingStep()
    if (trainerStep !== undefined && config.rollouts_per_step === null && config.close_on_step_advance) {
      const held = this.stepRow(step)?.trainer_step ?? null
      if (held !== null && trainerStep > held && this.hasShards(step)) {
        this.closeStep(step, 'step_advance')
        step = this.openCollectingStep()
      }
      this.sql.exec(
        'UPDATE steps SET trainer_step = max(coalesce(trainer_step, ?), ?) WHERE step = ?',
        trainerStep,
        trainerStep,
        step,
      )
    }
    const closes = shardStep < 0 ? [] : this.missedCloses(instanceId, shard, shardStep)
    const now = Date.now()
    const version = this.pinnedVersion(step, instanceId, newestVersion)
    this.sql.exec(COORDINATOR_SQL.announceShard, step, instanceId, shard, JSON.stringify(emptyTally()), version, now)
    await this.noteRollouts(config, now)
    return { step, closes, version, ...this.idleHint(config) }
  }

  /**
   * A shard's batch: its current step's tally (absolute) and the LLM calls since its last report. Closes the step
   * when the shards' counts reach `rollouts_per_step`. Answers with the collecting step and the closes to apply.
   */
  async report(report: ShardReport): Promise<CoordinatorReply> {
    const config = await this.runConfig()
    this.closeIfIdle(config)
    const collecting = this.openCollectingStep()
    this.addLlmStats(report.step, report.llm)
    // A shard takes part in a step by announcing itself or by reporting rollouts in it, never by reporting none.
    const known = report.step === collecting ? this.shardRow(report.step, report.instanceId, report.shard) : undefined
    if (report.step === collecting && (report.tally.rollouts > 0 || known)) {
      // Only new rollouts restart the idle gap: a shard repeating its tally (a retried report) is not the trainer.
      const before = known ? (JSON.parse(known.tally) as ScoreTally).rollouts : 0
      const arrived = report.tally.rollouts > before ? Date.now() : 0
      this.upsertShard(report.step, report.instanceId, report.shard, report.tally, arrived)
      if (arrived) await this.noteRollouts(config, arrived)
      if (config.rollouts_per_step !== null)
        this.closeByCount(config.rollouts_per_step, { instanceId: report.instanceId, shard: report.shard })
    }
    return {
      step: this.collectingStep(),
      closes: this.missedCloses(report.instanceId, report.shard, report.step),
      ...this.idleHint(config),
    }
  }

  /** The trainer's "step done": closes the collecting step, or `noop` when the run closes steps by count. */
  async complete(): Promise<{ status: 'complete' | 'noop'; step: number; closed: boolean }> {
    const config = await this.runConfig()
    const step = this.collectingStep()
    if (config.rollouts_per_step !== null) return { status: 'noop', step, closed: false }
    if (!this.hasShards(step)) return { status: 'complete', step, closed: false }
    this.closeStep(step, 'complete')
    // Every shard learns of the close before the answer, so a rollout sent after /complete belongs to the next step.
    await this.tellShards()
    return { status: 'complete', step, closed: true }
  }

  /** Where the run stands (or where `step` stands), without waiting. */
  async status(step?: number): Promise<RubricStatus> {
    const config = await this.runConfig()
    this.closeIfIdle(config)
    // An idle close and an unfinished step's next look are due by the alarm; a read re-arms it should it ever have been
    // lost (no write when one is set).
    const idleDeadline = this.idleDeadline(config)
    if (idleDeadline !== undefined) await this.wakeUp.by(idleDeadline)
    if (this.sql.exec(`SELECT 1 FROM steps WHERE status IN ('closing', 'updating') LIMIT 1`).toArray().length > 0)
      await this.wakeUp.by(Date.now() + STEP_WATCHDOG_MS)
    const reported = step === undefined ? this.reportedStep() : this.stepRow(step)
    const instances = reported ? this.stepInstances(reported) : []
    const outcomes = instances.flatMap((instance) => (instance.update ? [instance.update] : []))
    const total = (key: 'analysed' | 'failed' | 'hacking_flags') =>
      outcomes.reduce((sum, outcome) => sum + outcome[key], 0)
    const reasons: RubricStatus['analyses']['reasons'] = {}
    for (const outcome of outcomes)
      for (const [reason, count] of Object.entries(outcome.reasons))
        reasons[reason as keyof typeof reasons] = (reasons[reason as keyof typeof reasons] ?? 0) + count
    const rollouts = reported ? this.stepTally(reported).rollouts : 0
    const status = reported ? publicStatus(reported.status) : 'idle'
    return {
      run_id: this.runId,
      step: reported?.step ?? this.collectingStep(),
      status,
      rubric_version: this.meta.number('max_version', 1),
      instances: instances.map(({ instance_id, rubric_version, rollouts: count, update }) => ({
        instance_id,
        rubric_version,
        rollouts: count,
        ...(update ? { update } : {}),
      })),
      analyses: { analysed: total('analysed'), failed: total('failed'), reasons },
      hacking_flags: total('hacking_flags'),
      pending: status === 'updating' ? instances.filter((instance) => !instance.update).length : 0,
      rollouts,
      mode: config.mode,
      ...(status === 'collecting' || status === 'idle'
        ? { closes_when: this.closesWhen(config, rollouts, reported) }
        : {}),
      ...(reported?.closed_by ? { closed_by: reported.closed_by } : {}),
    }
  }

  /**
   * Every step of the run that has rollouts or has closed, oldest first (at most the newest `limit`), with its score
   * tally and each touched instance's rollouts and update outcome: the dashboard's timeline and charts. A read only.
   */
  async timeline(limit = DETAILED_STEPS): Promise<StepTimelineEntry[]> {
    const steps = this.sql.exec<StepRow>('SELECT * FROM steps ORDER BY step DESC LIMIT ?', limit).toArray().reverse()
    // The step opened by the last close has nothing to show until a shard reports a rollout in it.
    const shown = steps.filter((row) => row.status !== 'collecting' || this.hasShards(row.step))
    return shown.map((row) => {
      const tally = this.stepTally(row)
      return {
        step: row.step,
        status: publicStatus(row.status),
        rollouts: tally.rollouts,
        opened_at: row.opened_at,
        closed_at: row.closed_at,
        updated_at: row.updated_at,
        tally,
        instances: this.stepInstances(row).map((instance) => ({ ...instance, update: instance.update ?? null })),
      }
    })
  }

  /** LLM calls of the run by role, model and outcome, summed over its steps. */
  async llmCalls(): Promise<LlmStat[]> {
    return this.sql
      .exec<LlmStat & Record<string, SqlStorageValue>>(
        `SELECT role, model, outcome, sum(calls) AS calls, sum(latency_ms) AS latency_ms,
           sum(prompt_tokens) AS prompt_tokens, sum(completion_tokens) AS completion_tokens
         FROM llm_stats GROUP BY role, model, outcome ORDER BY role, model, outcome`,
      )
      .toArray()
  }

  /** Every instance that has taken part in the run, with its newest known rubric version. */
  async instances(): Promise<{ instance_id: string; rubric_version: number; rollouts: number }[]> {
    const known = new Map(
      this.sql
        .exec<{ instance_id: string; rubric_version: number; rollouts: number }>(
          'SELECT instance_id, rubric_version, rollouts FROM instances',
        )
        .toArray()
        .map((row) => [row.instance_id, row]),
    )
    // Steps not yet updated count from their shards' reports.
    for (const row of this.sql.exec<ShardRow>(
      `SELECT * FROM step_shards WHERE step IN (SELECT step FROM steps WHERE status != 'updated')`,
    )) {
      const tally = tallyOf(row)
      const instance = known.get(row.instance_id) ?? { instance_id: row.instance_id, rubric_version: 1, rollouts: 0 }
      known.set(row.instance_id, {
        ...instance,
        rubric_version: Math.max(instance.rubric_version, tally.max_version ?? 1),
        rollouts: instance.rollouts + tally.rollouts,
      })
    }
    return [...known.values()].sort((a, b) => (a.instance_id < b.instance_id ? -1 : 1))
  }

  /** Rollouts scored (distinct per step) and the last step with any, for the runs index. */
  async activity(): Promise<{ scores: number; last_step: number | null }> {
    const live = this.sql
      .exec<StepRow>(`SELECT * FROM steps WHERE status != 'updated' ORDER BY step`)
      .toArray()
      .map((row) => ({ step: row.step, rollouts: this.stepTally(row).rollouts }))
    const scores = this.meta.number('updated_rollouts', 0) + live.reduce((sum, row) => sum + row.rollouts, 0)
    const lastLive = live.filter((row) => row.rollouts > 0).at(-1)?.step
    const lastUpdated = this.sql
      .exec<{ step: number | null }>(`SELECT max(step) AS step FROM steps WHERE status = 'updated'`)
      .one().step
    return { scores, last_step: lastLive ?? lastUpdated ?? null }
  }

  /**
   * Waits until the step the trainer is waiting on has finished updating: the oldest closed step not yet updated,
   * else the collecting step if any shard has taken rollouts in it. Returns at once when nothing is pending.
   */
  async waitForUpdate(timeoutMs: number): Promise<{ done: boolean; status: RubricStatus }> {
    const updating = this.sql
      .exec<{ step: number }>(`SELECT step FROM steps WHERE status IN ('closing', 'updating') ORDER BY step LIMIT 1`)
      .toArray()[0]
    const collecting = this.collectingStep()
    const target = updating?.step ?? (this.hasShards(collecting) ? collecting : undefined)
    const done = target === undefined ? true : await this.waitForStep(target, timeoutMs)
    // Once done, the step waited on is the one to describe, though another may be collecting by now.
    return { done, status: await this.status(done ? target : undefined) }
  }

  /** Resolves true once `step` is updated, false when `timeoutMs` passes first. */
  private async waitForStep(step: number, timeoutMs: number): Promise<boolean> {
    if (this.stepRow(step)?.status === 'updated') return true
    return this.waiters.wait(step, timeoutMs, false)
  }

  /**
   * Tells the shards of closing steps, starts the updates of steps whose shards all know, and re-sends step jobs
   * that have not reported back well past their time (a lost message or a reset must not stall a step). Safe to run
   * again: closes and step jobs are idempotent.
   */
  override async alarm(): Promise<void> {
    await this.wakeUp.handle(() => this.runAlarm())
  }

  private async runAlarm(): Promise<void> {
    const config = await this.runConfig()
    this.closeIfIdle(config)
    await this.tellShards()
    const now = Date.now()
    const pending = this.sql
      .exec<{ step: number; instance_id: string; enqueued_at: number | null; status: string }>(
        `SELECT si.step, si.instance_id, si.enqueued_at, s.status
         FROM steps s JOIN step_instances si ON si.step = s.step
         WHERE s.status IN ('closing', 'updating') AND si.updated = 0 ORDER BY si.step, si.instance_id`,
      )
      .toArray()
    // One update at a time per instance, in step order: a later step's job waits for the earlier one's commit.
    const oldest = new Map<string, (typeof pending)[number]>()
    for (const row of pending) if (!oldest.has(row.instance_id)) oldest.set(row.instance_id, row)
    const jobs: StepJob[] = [...oldest.values()]
      .filter(
        (row) =>
          row.status === 'updating' && (row.enqueued_at === null || now >= row.enqueued_at + STEP_RESEND_AFTER_MS),
      )
      .map((row) => ({
        type: 'step',
        runId: this.runId,
        instanceId: row.instance_id,
        step: row.step,
        shards: this.closedShards(row.step, row.instance_id),
      }))
    for (let start = 0; start < jobs.length; start += 100) {
      const batch = jobs.slice(start, start + 100)
      await this.env.STEP_QUEUE.sendBatch(batch.map((body) => ({ body })))
      // Marked only once sent: a failed send throws, and the alarm's retry sends the job again.
      for (const job of batch)
        this.sql.exec(
          'UPDATE step_instances SET enqueued_at = ? WHERE step = ? AND instance_id = ?',
          now,
          job.step,
          job.instanceId,
        )
    }
    const unfinished = this.sql
      .exec<{ n: number }>(`SELECT count(*) AS n FROM steps WHERE status IN ('closing', 'updating')`)
      .one().n
    const next = Math.min(unfinished > 0 ? now + STEP_WATCHDOG_MS : Infinity, this.idleDeadline(config) ?? Infinity)
    // A close during this run has set an earlier alarm: the watchdog must not push it back.
    if (next !== Infinity) await this.wakeUp.by(next)
  }

  /**
   * Rollouts of the collecting step arrived: the idle gap starts again, and an alarm is pending by its end (an earlier
   * one looks again and moves on; the gap only ever ends later).
   */
  private async noteRollouts(config: RunConfig, at: number): Promise<void> {
    this.lastRolloutAt = Math.max(at, this.lastRolloutAt ?? 0)
    const deadline = this.idleDeadline(config)
    if (deadline !== undefined) await this.wakeUp.by(deadline)
  }

  /**
   * Closes the collecting step when its idle gap has passed. The alarm does it on time; every report, announce and
   * status read does it too, so a late or lost alarm can neither hold a finished step open nor let the next burst's
   * rollouts join it.
   */
  private closeIfIdle(config: RunConfig): void {
    const deadline = this.idleDeadline(config)
    if (deadline !== undefined && Date.now() >= deadline) this.closeStep(this.collectingStep(), 'idle')
  }

  /** When the collecting step closes for want of rollouts, if the run closes by idle gap and the step has any. */
  private idleDeadline(config: RunConfig): number | undefined {
    if (config.rollouts_per_step !== null || config.close_after_idle_s === null) return undefined
    if (!this.hasShards(this.collectingStep())) return undefined
    return this.lastRolloutTime() + config.close_after_idle_s * 1_000
  }

  /**
   * What a shard needs to know of the idle gap: when the collecting step closes if nothing else arrives. A shard asks
   * again before it records a rollout past that time, so a rollout after the gap never joins the step it ended.
   */
  private idleHint(config: RunConfig): { idleDeadline?: number } {
    const deadline = this.idleDeadline(config)
    return deadline === undefined ? {} : { idleDeadline: deadline }
  }

  /** When rollouts of the collecting step last arrived, from storage after a restart. */
  private lastRolloutTime(): number {
    if (this.lastRolloutAt !== undefined) return this.lastRolloutAt
    const stored = this.sql.exec<{ at: number | null }>(COORDINATOR_SQL.lastRolloutAt, this.collectingStep()).one().at
    // Storage from before the arrival times were kept has none: the gap starts at this wake.
    return (this.lastRolloutAt = stored ? stored : Date.now())
  }

  /**
   * The rubric version every rollout of `step` for the instance is scored on: the one the step's first row for the
   * instance was given, else the newest committed one, as the instance's updates reported it or as the announcing
   * shard has it (`newestVersion`; an update tells the shards before the coordinator). An update that commits while a
   * step collects so takes effect from the instance's next step.
   */
  private pinnedVersion(step: number, instanceId: string, newestVersion = 1): number {
    const pinned = this.sql.exec<{ version: number }>(COORDINATOR_SQL.pinnedVersion, step, instanceId).toArray()[0]
    if (pinned) return pinned.version
    const committed = this.sql
      .exec<{ rubric_version: number }>(COORDINATOR_SQL.committedVersion, instanceId)
      .toArray()[0]
    return Math.max(committed?.rubric_version ?? 1, newestVersion)
  }

  private upsertShard(step: number, instanceId: string, shard: number, tally: ScoreTally, arrivedAt: number): void {
    this.sql.exec(
      COORDINATOR_SQL.upsertShard,
      step,
      instanceId,
      shard,
      JSON.stringify(tally),
      this.pinnedVersion(step, instanceId),
      arrivedAt,
    )
  }

  /** What closes the collecting step, said for a person reading `/rubric_status`. */
  private closesWhen(config: RunConfig, rollouts: number, row: StepRow | undefined): string {
    if (config.rollouts_per_step !== null) {
      const missing = Math.max(0, config.rollouts_per_step - rollouts)
      return `after ${missing} more distinct rollouts (rollouts_per_step ${config.rollouts_per_step})`
    }
    const ways = ['on POST /complete']
    if (config.close_on_step_advance) {
      const held = row?.status === 'collecting' ? row.trainer_step : null
      ways.push(
        held === null
          ? "when a rollout's metadata.current_step is past the step's"
          : `when a rollout's metadata.current_step is past ${held}`,
      )
    }
    if (config.close_after_idle_s !== null) {
      const idle =
        rollouts > 0
          ? ` (the last rollout came ${Math.round((Date.now() - this.lastRolloutTime()) / 1_000)} s ago)`
          : ''
      ways.push(`after ${config.close_after_idle_s} s without a new rollout${idle}`)
    }
    return ways.length === 1 ? ways[0]! : `${ways.slice(0, -1).join(', ')} or ${ways.at(-1)}`
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
    const changed = this.sql.exec(
      'UPDATE step_instances SET updated = 1, rubric_version = ?, outcome = ? ' +
        'WHERE step = ? AND instance_id = ? AND updated = 0',
      outcome.rubric_version,
      JSON.stringify(outcome),
      step,
      instanceId,
    ).rowsWritten
    if (changed > 0) {
      this.addLlmStats(step, llm)
      this.sql.exec(
        `INSERT INTO instances (instance_id, rubric_version, rollouts, last_step) VALUES (?, ?, ?, ?)
         ON CONFLICT (instance_id) DO UPDATE SET rubric_version = max(rubric_version, excluded.rubric_version),
           rollouts = rollouts + excluded.rollouts, last_step = max(last_step, excluded.last_step)`,
        instanceId,
        outcome.rubric_version,
        outcome.rollouts,
        step,
      )
    }
    this.noteVersion(outcome.rubric_version)
    const next = this.sql
      .exec<{ n: number }>(
        'SELECT count(*) AS n FROM step_instances WHERE instance_id = ? AND step > ? AND updated = 0',
        instanceId,
        step,
      )
      .one().n
    // The instance's next step update was held back for this one: send it now, not at the watchdog.
    if (changed > 0 && next > 0) await this.wakeUp.by(Date.now())
    const remaining = this.sql
      .exec<{ n: number }>('SELECT count(*) AS n FROM step_instances WHERE step = ? AND updated = 0', step)
      .one().n
    if (remaining === 0) this.stepDone(step)
    return { stepUpdated: remaining === 0 }
  }

  /**
   * Closes the collecting step once the shards' counts reach `n`. The step keeps exactly `n` rollouts: each shard
   * what it had reported before the shard that filled the step (`last`), which keeps what is left; what any shard
   * holds past its share opens the next step (and may fill it too).
   */
  private closeByCount(n: number, last?: { instanceId: string; shard: number }): void {
    for (;;) {
      const step = this.collectingStep()
      const rows = this.shardRows(step)
      if (rows.reduce((sum, row) => sum + tallyOf(row).rollouts, 0) < n) return
      const isLast = (row: ShardRow) => row.instance_id === last?.instanceId && row.shard === last?.shard
      const ordered = [...rows.filter((row) => !isLast(row)), ...rows.filter(isLast)]
      let remaining = n
      const keeps = ordered.map((row) => {
        const keep = Math.min(tallyOf(row).rollouts, remaining)
        remaining -= keep
        return { row, keep }
      })
      this.closeStep(
        step,
        'count',
        keeps.map(({ row, keep }) => ({ instanceId: row.instance_id, shard: row.shard, keep })),
      )
      for (const { row, keep } of keeps) {
        const over = tallyOf(row).rollouts - keep
        if (over === 0) continue
        this.upsertShard(step + 1, row.instance_id, row.shard, { ...emptyTally(), rollouts: over }, row.last_at)
      }
    }
  }

  /**
   * Stops `step` taking rollouts: after a count close each shard keeps its share (`keeps`); after `/complete`,
   * everything it holds. The shards are told by the alarm (or by `/complete` itself).
   */
  private closeStep(
    step: number,
    reason: CloseReason,
    keeps?: readonly { instanceId: string; shard: number; keep: number }[],
  ): void {
    const now = new Date().toISOString()
    this.ctx.storage.transactionSync(() => {
      this.sql.exec(
        `UPDATE steps SET status = 'closing', closed_at = ?, closed_by = ? WHERE step = ? AND status = 'collecting'`,
        now,
        reason,
        step,
      )
      for (const { instanceId, shard, keep } of keeps ?? []) {
        this.sql.exec(
          'UPDATE step_shards SET keep = ? WHERE step = ? AND instance_id = ? AND shard = ?',
          keep,
          step,
          instanceId,
          shard,
        )
      }
      this.meta.set('collecting_step', step + 1)
      this.openCollectingStep()
    })
    this.lastRolloutAt = undefined
    void this.wakeUp.by(Date.now())
  }

  /** Tells every shard of a closing step that has not confirmed yet; a step whose shards all know starts updating. */
  private async tellShards(): Promise<void> {
    const runId = this.runId
    const closing = this.sql
      .exec<{ step: number }>(`SELECT step FROM steps WHERE status = 'closing' ORDER BY step`)
      .toArray()
    const limit = pLimit(CLOSE_FAN_OUT)
    let budget = CLOSE_CALLS_PER_ALARM
    for (const { step } of closing) {
      const unacked = this.shardRows(step)
        .filter((row) => row.acked === 0)
        .slice(0, budget)
      budget -= unacked.length
      await Promise.all(
        unacked.map((row) =>
          limit(async () => {
            try {
              const reply = await this.env.LEDGER.getByName(ledgerName(runId, row.instance_id, row.shard)).learnClose({
                step,
                keep: row.keep,
              })
              this.sql.exec(
                'UPDATE step_shards SET acked = 1, keep = ?, tally = ? ' +
                  'WHERE step = ? AND instance_id = ? AND shard = ?',
                reply.closed.rollouts,
                JSON.stringify(reply.closed),
                step,
                row.instance_id,
                row.shard,
              )
              this.addLlmStats(step, reply.llm)
              // Rollouts the shard moved on count in the collecting step; moved into a step that has closed since, they
              // were counted nowhere, and the shard's next report learns they move on again (a close that keeps none).
              if (reply.current.tally.rollouts > 0 && reply.current.step === this.collectingStep())
                this.upsertShard(reply.current.step, row.instance_id, row.shard, reply.current.tally, row.last_at)
            } catch (error) {
              // The watchdog alarm tries again; the shard also learns of the close from its next report.
              console.error(`[${runId}] could not tell ${row.instance_id}#${row.shard} that step ${step} closed`, error)
            }
          }),
        ),
      )
      if (this.shardRows(step).some((row) => row.acked === 0)) {
        if (budget > 0) continue
        // The rest in the next alarm, at once.
        await this.wakeUp.by(Date.now())
        break
      }
      this.startUpdates(step)
    }
    // Rollouts moved into the collecting step by a close may fill it on their own.
    const config = await this.runConfig()
    if (config.rollouts_per_step !== null) this.closeByCount(config.rollouts_per_step)
  }

  private startUpdates(step: number): void {
    const byInstance = new Map<string, { rollouts: number; version: number }>()
    for (const row of this.shardRows(step)) {
      const tally = tallyOf(row)
      const sum = byInstance.get(row.instance_id) ?? { rollouts: 0, version: 1 }
      byInstance.set(row.instance_id, {
        rollouts: sum.rollouts + tally.rollouts,
        version: Math.max(sum.version, tally.max_version ?? 1),
      })
    }
    const touched = [...byInstance].filter(([, sum]) => sum.rollouts > 0)
    this.ctx.storage.transactionSync(() => {
      this.sql.exec(`UPDATE steps SET status = 'updating' WHERE step = ? AND status = 'closing'`, step)
      for (const [instanceId, { rollouts, version }] of touched) {
        this.sql.exec(
          'INSERT OR IGNORE INTO step_instances (step, instance_id, rubric_version, rollouts) VALUES (?, ?, ?, ?)',
          step,
          instanceId,
          version,
          rollouts,
        )
        this.noteVersion(version)
      }
    })
    if (touched.length === 0) this.stepDone(step)
  }

  private stepDone(step: number): void {
    const row = this.stepRow(step)
    if (!row || row.status === 'updated') return
    const tally = this.stepTally(row)
    this.ctx.storage.transactionSync(() => {
      this.sql.exec(
        `UPDATE steps SET status = 'updated', updated_at = coalesce(updated_at, ?), tally = ? WHERE step = ?`,
        new Date().toISOString(),
        JSON.stringify(tally),
        step,
      )
      this.meta.set('updated_rollouts', this.meta.number('updated_rollouts', 0) + tally.rollouts)
    })
    this.forgetOldDetail(step)
    this.waiters.release((waited) => waited === step, true)
  }

  /** Old steps keep their summary row: their shard and instance rows, and their per-step LLM sums, are folded away. */
  private forgetOldDetail(step: number): void {
    const oldest = step - DETAILED_STEPS
    if (oldest < 0) return
    this.ctx.storage.transactionSync(() => {
      this.sql.exec(
        `DELETE FROM step_shards WHERE step <= ? AND step IN (SELECT step FROM steps WHERE status = 'updated')`,
        oldest,
      )
      this.sql.exec('DELETE FROM step_instances WHERE step <= ? AND updated = 1', oldest)
      this.sql.exec(
        `INSERT INTO llm_stats (step, role, model, outcome, calls, latency_ms, prompt_tokens, completion_tokens)
         SELECT -1, role, model, outcome, sum(calls), sum(latency_ms), sum(prompt_tokens), sum(completion_tokens)
         FROM llm_stats WHERE step BETWEEN 0 AND ? GROUP BY role, model, outcome
         ON CONFLICT (step, role, model, outcome) DO UPDATE SET calls = calls + excluded.calls,
           latency_ms = latency_ms + excluded.latency_ms, prompt_tokens = prompt_tokens + excluded.prompt_tokens,
           completion_tokens = completion_tokens + excluded.completion_tokens`,
        oldest,
      )
      this.sql.exec('DELETE FROM llm_stats WHERE step BETWEEN 0 AND ?', oldest)
    })
  }

  /**
   * Closed steps from `fromStep` (the shard's step) on: each with what the shard keeps of it. A shard ignores a close
   * it has applied; a step the coordinator never saw the shard in keeps none of its rollouts (they were not counted
   * there, so they move on).
   */
  private missedCloses(instanceId: string, shard: number, fromStep: number): CloseNotice[] {
    const collecting = this.collectingStep()
    if (fromStep >= collecting) return []
    const keeps = new Map(
      this.sql
        .exec<{ step: number; keep: number | null }>(
          'SELECT step, keep FROM step_shards WHERE instance_id = ? AND shard = ? AND step >= ? AND step < ?',
          instanceId,
          shard,
          fromStep,
          collecting,
        )
        .toArray()
        .map((row) => [row.step, row.keep]),
    )
    const notices: CloseNotice[] = []
    for (let step = fromStep; step < collecting; step++)
      notices.push({ step, keep: keeps.has(step) ? keeps.get(step)! : 0 })
    return notices
  }

  /** The shards of an instance that took part in a closed step, with what each keeps: what its update reads. */
  private closedShards(step: number, instanceId: string): StepJob['shards'] {
    return this.sql
      .exec<{ shard: number; keep: number | null }>(
        'SELECT shard, keep FROM step_shards WHERE step = ? AND instance_id = ? ORDER BY shard',
        step,
        instanceId,
      )
      .toArray()
  }

  private stepInstances(
    row: StepRow,
  ): { instance_id: string; rubric_version: number; rollouts: number; update?: StepUpdateOutcome }[] {
    if (row.status === 'collecting' || row.status === 'closing') {
      const byInstance = new Map<string, ScoreTally[]>()
      for (const shardRow of this.shardRows(row.step))
        byInstance.set(shardRow.instance_id, [...(byInstance.get(shardRow.instance_id) ?? []), tallyOf(shardRow)])
      return [...byInstance]
        .map(([instance_id, tallies]) => {
          const tally = mergeTallies(tallies)
          return { instance_id, rubric_version: tally.max_version ?? 1, rollouts: tally.rollouts }
        })
        .sort((a, b) => (a.instance_id < b.instance_id ? -1 : 1))
    }
    return this.sql
      .exec<{ instance_id: string; rubric_version: number; rollouts: number; outcome: string | null }>(
        'SELECT instance_id, rubric_version, rollouts, outcome FROM step_instances WHERE step = ? ORDER BY instance_id',
        row.step,
      )
      .toArray()
      .map(({ outcome, ...instance }) => ({
        ...instance,
        ...(outcome ? { update: JSON.parse(outcome) as StepUpdateOutcome } : {}),
      }))
  }

  private stepTally(row: StepRow): ScoreTally {
    if (row.tally) return JSON.parse(row.tally) as ScoreTally
    return mergeTallies(this.shardRows(row.step).map(tallyOf))
  }

  private addLlmStats(step: number, stats: readonly LlmStat[]): void {
    for (const stat of stats) {
      this.sql.exec(
        `INSERT INTO llm_stats (step, role, model, outcome, calls, latency_ms, prompt_tokens, completion_tokens)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (step, role, model, outcome) DO UPDATE SET calls = calls + excluded.calls,
           latency_ms = latency_ms + excluded.latency_ms, prompt_tokens = prompt_tokens + excluded.prompt_tokens,
           completion_tokens = completion_tokens + excluded.completion_tokens`,
        step,
        stat.role,
        stat.model,
        stat.outcome,
        stat.calls,
        stat.latency_ms,
        stat.prompt_tokens,
        stat.completion_tokens,
      )
    }
  }

  /**
   * The step `/rubric_status` describes: a closed one not yet updated first, then the collecting one if it has
   * rollouts, then the last updated.
   */
  private reportedStep(): StepRow | undefined {
    const updating = this.sql
      .exec<StepRow>(`SELECT * FROM steps WHERE status IN ('closing', 'updating') ORDER BY step LIMIT 1`)
      .toArray()[0]
    if (updating) return updating
    const collecting = this.stepRow(this.collectingStep())
    if (collecting && this.hasShards(collecting.step)) return collecting
    return this.sql
      .exec<StepRow>(`SELECT * FROM steps WHERE status = 'updated' ORDER BY step DESC LIMIT 1`)
      .toArray()[0]
  }

  private shardRows(step: number): ShardRow[] {
    return this.sql.exec<ShardRow>('SELECT * FROM step_shards WHERE step = ?', step).toArray()
  }

  /** Whether any shard has taken part in `step`: one row read, where the steps' hot paths ask it. */
  private hasShards(step: number): boolean {
    return this.sql.exec('SELECT 1 FROM step_shards WHERE step = ? LIMIT 1', step).toArray().length > 0
  }

  private shardRow(step: number, instanceId: string, shard: number): ShardRow | undefined {
    return this.sql
      .exec<ShardRow>(
        'SELECT * FROM step_shards WHERE step = ? AND instance_id = ? AND shard = ?',
        step,
        instanceId,
        shard,
      )
      .toArray()[0]
  }

  private stepRow(step: number): StepRow | undefined {
    return this.sql.exec<StepRow>('SELECT * FROM steps WHERE step = ?', step).toArray()[0]
  }

  private collectingStep(): number {
    return this.meta.number('collecting_step', 0)
  }

  private openCollectingStep(): number {
    const step = this.collectingStep()
    this.sql.exec(
      `INSERT OR IGNORE INTO steps (step, status, opened_at) VALUES (?, 'collecting', ?)`,
      step,
      new Date().toISOString(),
    )
    return step
  }

  private noteVersion(version: number): void {
    if (version > this.meta.number('max_version', 1)) this.meta.set('max_version', version)
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

function tallyOf(row: ShardRow): ScoreTally {
  return JSON.parse(row.tally) as ScoreTally
}

function publicStatus(status: StoredStepStatus): Exclude<StepStatus, 'idle'> {
  return status === 'closing' ? 'updating' : status
}
