import { DurableObject } from 'cloudflare:workers'
import type { RubricSnapshot } from '../../src/schemas/rubric.ts'
import { addScore, emptyTally, type ScoreTally } from '../../src/scoring/tally.ts'
import { Alarm } from '../alarm.ts'
import type {
  CloseNotice,
  CoordinatorReply,
  Judged,
  LedgerEntry,
  RecordedRollout,
  RecordReply,
  RolloutAnalysis,
  ShardAddress,
  StepRollout,
  Submission,
} from '../contracts.ts'
import { objectName } from '../identity.ts'
import { MetaStore } from '../meta-store.ts'
import { coordinatorName, instanceName, ledgerAddressOf, ledgerName } from '../names.ts'
import { loadRunConfig } from '../run-config.ts'
import { applySchema } from '../schema.ts'
import { Placement } from './placement.ts'
import { Recorder } from './recorder.ts'
import { reportIntervalMs } from './report-interval.ts'
import { Retention } from './retention.ts'
import { LedgerRows } from './rows.ts'
import { SeatLease } from './seat-lease.ts'
import { Settlement } from './settlement.ts'
import { ShardSnapshots } from './snapshots.ts'
import { ShardSteps, upgradeStepState } from './steps.ts'
import { LEDGER_TABLES } from './tables.ts'

/**
 * One slice of a run × instance's step ledger: the rollouts whose id hashes here (`ledgerShardOf`). It is the only
 * Durable Object a `/score` touches: one call records each judged rollout once (a rollout id already recorded in this
 * step or the `LATE_RETRY_STEPS` before it gets its first answer back) and answers with the rubrics in force when the
 * caller's copy is older. The coordinator places new rollouts: once per step for a run whose steps close on
 * `/complete`, a trainer step or an idle gap, and seat by seat when steps close by count, so every answer names the
 * step its rollout stays in. Tallies go to the coordinator in batches (an alarm every `reportIntervalMs`).
 * @example const reply = await env.LEDGER.getByName(ledgerName(runId, 'global', 3)).record(submissions, 1)
 */
export class LedgerShard extends DurableObject<Cloudflare.Env> {
  private readonly meta: MetaStore
  private readonly rows: LedgerRows
  private readonly steps: ShardSteps
  private readonly snapshots: ShardSnapshots
  private readonly retention: Retention
  private readonly placement: Placement
  private readonly lease: SeatLease
  private readonly recorder: Recorder
  private readonly settlement: Settlement
  private readonly wakeUp: Alarm
  /** Records between their placement and their rows: a close waits for them, so its tally has every row. */
  private readonly recording = new Set<Promise<unknown>>()
  /** The current step's tally (rebuilt from the ledger on wake): what a report sends. */
  private tally: ScoreTally | undefined
  /** Something a report may not have carried yet: true after a wake, since the last report is not remembered. */
  private dirty = true

  constructor(ctx: DurableObjectState, env: Cloudflare.Env) {
    super(ctx, env)
    const sql = ctx.storage.sql
    this.meta = new MetaStore(sql)
    this.rows = new LedgerRows(sql)
    this.steps = new ShardSteps(sql, this.meta)
    applySchema(sql, LEDGER_TABLES, () => upgradeStepState(sql, this.meta))
    const instance = () => env.RUBRIC_INSTANCE.getByName(instanceName(this.address.runId, this.address.instanceId))
    this.snapshots = new ShardSnapshots(this.meta, instance, () => this.address.instanceId)
    this.retention = new Retention(sql, this.meta, this.steps, this.rows, () => env.ARCHIVE)
    this.wakeUp = new Alarm(ctx.storage)
    this.lease = new SeatLease(this.steps, this.rows)
    this.placement = new Placement(this.steps, this.lease, {
      newestVersion: async () => (await this.snapshots.current()).version,
      announce: (announce) => this.coordinator(this.address).announce(announce),
      address: () => this.address,
      applyReply: (reply) => this.applyReply(reply),
    })
    this.recorder = new Recorder(ctx.storage, this.rows, this.steps, this.placement, this.lease, (entry, submitted) => {
      this.dirty = true
      if (entry.step !== this.steps.current()) return
      if (this.tally) addScore(this.tally, entry.score, entry.rubric_version, submitted.judgedInMs)
    })
    const changed = (step: number) => {
      if (step === this.steps.current()) this.tally = undefined
    }
    const archived = (step: number) => this.retention.isArchived(step)
    this.settlement = new Settlement(this.rows, this.steps, this.snapshots, archived, changed)
  }

  /**
   * Records judged rollouts: a rollout id recorded in this step or the `LATE_RETRY_STEPS` before it gets its first
   * entry back as a duplicate (nothing written, nothing announced), as do the other copies of an id in the request and
   * a request that overlaps one in flight; a new one is recorded in the step the coordinator places it in, when it was
   * judged on that step's rubric version, and is answered `judge` (with those rubrics in the reply) when not,
   * `refused` when a budget of the run keeps its instance out of the step, or `failed` on its own (too large to store,
   * no seat to be had now, a row that failed). A submission without a judgement is a lookup. `knownVersion` is the
   * caller's rubric version: the reply carries the snapshot when it is older.
   */
  async record(submissions: readonly Submission[], knownVersion: number): Promise<RecordReply> {
    const work = this.recordNow(submissions, knownVersion)
    this.recording.add(work)
    try {
      return await work
    } finally {
      this.recording.delete(work)
    }
  }

  /**
   * Sync mode: the final score of a rollout of a closed step, judged on the rubrics its step's update left
   * (`awaitUpdate`), kept for good; a row already final stays as it is. Undefined when the row is gone.
   */
  async settle(step: number, rolloutId: string, judged: Judged): Promise<LedgerEntry | undefined> {
    return this.settlement.settle(step, rolloutId, judged)
  }

  /** Sync mode: the rollout keeps the score it was first answered with (its wait for the update ran out). */
  async finalize(step: number, rolloutId: string): Promise<LedgerEntry | undefined> {
    return this.settlement.finalize(step, rolloutId)
  }

  /** Sync mode, a retry: the rollout's row once its first request has made it final (never judged again). */
  async awaitFinal(step: number, rolloutId: string, timeoutMs: number): Promise<LedgerEntry | undefined> {
    return this.settlement.awaitFinal(step, rolloutId, timeoutMs)
  }

  /**
   * The coordinator closed `notice.step`: rollouts from now on belong to a later step. Waits for the records already
   * placed, then answers this shard's tally of the closed step and of its current one. Idempotent.
   */
  async learnClose(notice: CloseNotice): Promise<{ closed: ScoreTally; current: { step: number; tally: ScoreTally } }> {
    await this.applyCloses([notice], { waitForRecords: true })
    return {
      closed: this.rows.tally(notice.step),
      current: { step: this.steps.current()!, tally: this.currentTally() },
    }
  }

  /** The rollouts of a closed step in this shard, small: what the step's update selects its analyses from. */
  async stepRollouts(close: CloseNotice): Promise<StepRollout[]> {
    await this.applyCloses([close], { waitForRecords: true })
    return this.rows.stepRollouts(close.step, this.address.shard)
  }

  /**
   * The coordinator calls back the free seats this shard leased in counted `step` (another shard needs them): the
   * lease shrinks to the seats taken, and the answer is that lease. Sent again, it answers the same.
   */
  async yieldSeats(step: number): Promise<{ leased: number }> {
    return { leased: this.lease.yieldFree(step) }
  }

  /** Recorded rollouts in full, for their analyses; ids no longer (or never) in the ledger are left out. */
  async rollouts(step: number, rolloutIds: readonly string[]): Promise<RecordedRollout[]> {
    return this.rows.rollouts(step, rolloutIds)
  }

  /** Keeps how each rollout's analysis ended on its row; a repeat changes nothing. Returns how many rows changed. */
  async recordAnalyses(step: number, outcomes: readonly { rollout_id: string; analysis: RolloutAnalysis }[]) {
    let changed = 0
    this.ctx.storage.transactionSync(() => {
      for (const { rollout_id, analysis } of outcomes) changed += this.rows.recordAnalysis(step, rollout_id, analysis)
    })
    return changed
  }

  /**
   * A step's update committed: its rows may go once `retention` more updates have, and `snapshot` (the rubrics now in
   * force) replaces this shard's copy when newer.
   */
  async stepUpdated(step: number, snapshot: RubricSnapshot): Promise<void> {
    this.steps.noteUpdate(step, snapshot.version)
    this.snapshots.offer(snapshot)
    await this.settlement.stepUpdated(step)
    await this.wakeUp.by(Date.now())
  }

  /**
   * Waits until the instance's update of `step` has committed and answers the rubrics then in force, or `undefined`
   * after `timeoutMs`. The sync-mode release: the snapshot travels with the wake-up, so waiters spread over the
   * shards cost no call when they are released.
   */
  async awaitUpdate(step: number, timeoutMs: number): Promise<RubricSnapshot | undefined> {
    return this.settlement.awaitUpdate(step, timeoutMs)
  }

  /** Reports to the coordinator, writes closed steps to the archive, deletes steps past their retention. */
  override async alarm(): Promise<void> {
    await this.wakeUp.handle(async () => {
      const address = this.address
      const retry = Date.now() + reportIntervalMs(this.env, { counted: false })
      if (this.dirty) {
        try {
          await this.report(address)
        } catch (error) {
          console.error(`[${address.runId}/${address.instanceId}#${address.shard}] report failed; retrying`, error)
          return this.wakeUp.by(retry)
        }
      }
      const config = () => loadRunConfig(this.env.DB, address.runId)
      const again = await this.retention.run(address, config, reportIntervalMs(this.env, { counted: false }))
      if (again !== undefined) await this.wakeUp.by(again)
    })
  }

  private async recordNow(submissions: readonly Submission[], knownVersion: number): Promise<RecordReply> {
    const answers = await this.recorder.record(submissions)
    const current = this.steps.current()
    // One alarm for the request's rows: a report of them within the interval. A counted step's coordinator hears of
    // its seats at every ask for more, so its shards report less often.
    if (answers.some((answer) => answer.kind === 'recorded' && !answer.duplicate))
      await this.wakeUp.by(Date.now() + reportIntervalMs(this.env, { counted: this.placement.isCounted() }))
    const pinned = current === undefined ? undefined : this.steps.pinned(current)
    const target = pinned === undefined ? await this.snapshots.current() : await this.snapshots.of(pinned)
    const needsSnapshot = knownVersion !== target.version || answers.some((answer) => answer.kind === 'judge')
    return {
      answers,
      ...(needsSnapshot ? { snapshot: target, ...(pinned === undefined ? {} : { pinned: true }) } : {}),
    }
  }

  private async report(address: ShardAddress): Promise<void> {
    const step = this.steps.current()
    this.dirty = false
    if (step === undefined) return
    try {
      const reply = await this.coordinator(address).report({
        instanceId: address.instanceId,
        shard: address.shard,
        step,
        tally: this.currentTally(),
        ...(this.placement.isCounted() ? { taken: this.lease.taken(step) } : {}),
      })
      this.applyReply(reply)
    } catch (error) {
      this.dirty = true
      throw error
    }
  }

  private applyReply(reply: CoordinatorReply): void {
    this.placement.heard(reply)
    void this.applyCloses(reply.closes, { waitForRecords: false })
    this.advanceTo(reply.step)
  }

  /**
   * Moves past the closed steps; for a reader of their rows (the coordinator's close, the step's update), then waits
   * for the records already placed in them, so it reads every row.
   */
  private async applyCloses(notices: readonly CloseNotice[], { waitForRecords }: { waitForRecords: boolean }) {
    if (notices.length === 0) return
    this.advanceTo(Math.max(...notices.map((notice) => notice.step)) + 1)
    if (waitForRecords) await Promise.allSettled([...this.recording])
  }

  private advanceTo(step: number): void {
    const current = this.steps.current()
    if (current !== undefined && current >= step) return
    this.steps.advanceTo(step)
    this.tally = undefined
  }

  private currentTally(): ScoreTally {
    const step = this.steps.current()
    return (this.tally ??= step === undefined ? emptyTally() : this.rows.tally(step))
  }

  /** Which run, instance and shard this is: the name it was reached by. */
  private get address(): ShardAddress {
    return ledgerAddressOf(
      objectName(this.ctx, this.meta, () => {
        const runId = this.meta.get('run_id')
        return runId && ledgerName(runId, this.meta.get('instance_id')!, this.meta.number('shard', 0))
      }),
    )
  }

  private coordinator(address: ShardAddress) {
    return this.env.RUN_COORDINATOR.getByName(coordinatorName(address.runId))
  }
}
