import { DurableObject } from 'cloudflare:workers'
import { fnv1a } from '../../src/hash/index.ts'
import { addLlmStats } from '../../src/llm/stats.ts'
import type { ArchivedRollout } from '../../src/schemas/archive.ts'
import type { RubricSnapshot } from '../../src/schemas/rubric.ts'
import { addScore, emptyTally, type ScoreTally } from '../../src/scoring/tally.ts'
import { loadRunConfig } from '../run-config.ts'
import type {
  CloseNotice,
  CoordinatorReply,
  Judged,
  LedgerEntry,
  LlmStat,
  RecordedRollout,
  RecordReply,
  RolloutAnalysis,
  ShardAddress,
  ShardAnswer,
  StepRollout,
  Submission,
} from '../contracts.ts'
import { MetaStore } from '../meta-store.ts'
import { Alarm } from '../alarm.ts'
import { objectName } from '../identity.ts'
import { archiveKey, coordinatorName, instanceName, ledgerAddressOf, ledgerName } from '../names.ts'
import { applySchema, type TableSchema } from '../schema.ts'
import { Waiters } from '../waiters.ts'

/**
 * How long a shard collects rollouts and LLM calls before it reports them to the run's coordinator (`LEDGER_REPORT_MS`
 * overrides).
 */
const REPORT_INTERVAL_MS = 1_000

const LEDGER_TABLES: Record<string, TableSchema> = {
  // Every query goes by (step) or (step, rollout_id): the key b-tree is the table, one row written per insert and per
  // delete.
  ledger: {
    columns: {
      step: 'INTEGER NOT NULL',
      rollout_id: 'TEXT NOT NULL',
      seq: 'INTEGER NOT NULL',
      rubric_version: 'INTEGER NOT NULL',
      score: 'REAL NOT NULL',
      cached: 'INTEGER NOT NULL',
      grp: 'TEXT NOT NULL',
      output_chars: 'INTEGER NOT NULL',
      output_hash: 'TEXT NOT NULL',
      tactics: 'TEXT',
      analysis: 'TEXT',
      created_at: 'INTEGER NOT NULL',
      judge_model: 'TEXT NOT NULL',
      criteria: 'TEXT NOT NULL',
      metadata: 'TEXT NOT NULL',
      rollout: 'TEXT NOT NULL',
    },
    constraints: ['PRIMARY KEY (step, rollout_id)'],
    withoutRowid: true,
  },
}

/**
 * A row of `LEDGER_SQL.stepRollouts`: what a closed step's update reads of each rollout.
 * @internal
 */
export interface StepRolloutRow extends Record<string, SqlStorageValue> {
  rollout_id: string
  rubric_version: number
  score: number
  grp: string
  output_chars: number
  output_hash: string
  criteria: string
  tactics: string | null
  analysis: string | null
}

/**
 * Every statement the ledger runs, by name: each goes by a prefix of the primary key (a test reads their query plans).
 * @internal
 */
export const LEDGER_SQL = {
  entry:
    'SELECT step, rollout_id, rubric_version, score, criteria, cached FROM ledger WHERE step = ? AND rollout_id = ?',
  insert: `INSERT INTO ledger (step, rollout_id, seq, rubric_version, score, cached, grp, output_chars, output_hash,
      tactics, analysis, created_at, judge_model, criteria, metadata, rollout)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?, ?)`,
  stepScores: 'SELECT score, rubric_version FROM ledger WHERE step = ?',
  stepRollouts:
    'SELECT rollout_id, rubric_version, score, grp, output_chars, output_hash, criteria, tactics, analysis ' +
    'FROM ledger WHERE step = ?',
  rollout:
    'SELECT step, rollout_id, rubric_version, score, criteria, cached, rollout, metadata ' +
    'FROM ledger WHERE step = ? AND rollout_id = ?',
  recordAnalysis:
    'UPDATE ledger SET analysis = ? WHERE step = ? AND rollout_id = ? ' +
    "AND (analysis IS NULL OR json_extract(analysis, '$.status') != 'done')",
  countPastCut: 'SELECT max(0, count(*) - ?) AS n FROM ledger WHERE step = ?',
  movePastCut:
    'UPDATE ledger SET step = step + 1 WHERE step = ? ' +
    'AND rollout_id IN (SELECT rollout_id FROM ledger WHERE step = ? ORDER BY seq LIMIT -1 OFFSET ?)',
  archiveStep:
    'SELECT step, rollout_id, rubric_version, score, criteria, cached, rollout, metadata, judge_model, created_at ' +
    'FROM ledger WHERE step = ? ORDER BY seq',
  deleteThrough: 'DELETE FROM ledger WHERE step <= ?',
  settle:
    'UPDATE ledger SET rubric_version = ?, score = ?, criteria = ?, cached = ?, judge_model = ? ' +
    'WHERE step = ? AND rollout_id = ?',
  unsettled: 'SELECT count(*) AS n FROM ledger WHERE step = ? AND rubric_version != ?',
} as const

type EntryRow = {
  step: number
  rollout_id: string
  rubric_version: number
  score: number
  criteria: string
  cached: number
}

/**
 * One slice of a run × instance's step ledger: the rollouts whose id hashes here (`ledgerShardOf`). It is the only
 * Durable Object a `/score` touches: one call records the judged rollout once per step (a second call for the same
 * id gets the first score back) and answers with the rubrics in force when the caller's copy is older. Counts go to
 * the run's coordinator in batches (an alarm every `REPORT_INTERVAL_MS`); the coordinator answers with the steps it
 * closed, and the shard moves what came after the cut to the next step. A step's rows are kept until
 * `ledger_retention_steps` later updates have committed (archived to R2 first when the run says `archive`), then
 * deleted.
 */
export class LedgerShard extends DurableObject<Cloudflare.Env> {
  private readonly sql: SqlStorage
  private readonly meta: MetaStore
  /** The current step's scores, kept in memory (rebuilt from the ledger on wake): what a report sends. */
  private tally: ScoreTally | undefined
  /** LLM calls of `/score` requests since the last report, by role, model and outcome. */
  private llm = new Map<string, LlmStat>()
  /**
   * The step the coordinator knows this shard takes rollouts in, and the rubric version its rollouts of the instance
   * are scored on there; a first rollout of any other step announces it first.
   */
  private announced: { step: number; version: number } | undefined
  /** When the coordinator closes the step by idle gap unless rollouts arrive first: past it, a write asks again. */
  private idleDeadline: number | undefined
  private announcing: Promise<void> | undefined
  private lastSeq = 0
  /** Something a report may not have carried yet: true after a restart, since the last report is not remembered. */
  private dirty = true
  private readonly wakeUp: Alarm
  private snapshotCache: RubricSnapshot | undefined
  /** Older rubric versions this shard was asked to score a step on, by version (rare: read from the instance). */
  private readonly olderSnapshots = new Map<number, RubricSnapshot>()
  /** Sync-mode `/score` requests waiting for a step's update, released by `stepUpdated`. */
  private readonly waiters = new Waiters<number, RubricSnapshot | undefined>()

  constructor(ctx: DurableObjectState, env: Cloudflare.Env) {
    super(ctx, env)
    this.sql = ctx.storage.sql
    this.meta = new MetaStore(this.sql)
    this.wakeUp = new Alarm(ctx.storage)
    applySchema(this.sql, LEDGER_TABLES)
  }

  /**
   * Records judged rollouts, each once per step: the first writer for a (step, rollout id) wins and later ones get its
   * entry back as a duplicate. A submission without a judgement is a lookup: its earlier entry, or `judge`.
   * `knownVersion` is the caller's rubric version: the reply carries the snapshot when it is older, so an isolate
   * judges on older rubrics only what it had in flight when they changed (each score names its version).
   * `earlierSteps` closed steps are searched for the id too (sync mode: a trainer's retry of a request it gave up on
   * arrives after its step closed, and is the same rollout).
   */
  async record(
    submissions: readonly Submission[],
    knownVersion: number,
    llm: readonly LlmStat[] = [],
    earlierSteps = 0,
  ): Promise<RecordReply> {
    addLlmStats(this.llm, llm)
    const snapshot = await this.currentSnapshot()
    // A close may land while the announce waits; the step a rollout is written in must be one the coordinator knows
    // this shard in.
    const writes = submissions.some((submission) => submission.judged)
    // Rollouts of a later trainer step than the shard has seen in its step are announced first: they may close it.
    const trainerStep = Math.max(
      ...submissions.filter((submission) => submission.judged).map((submission) => submission.metadata.current_step),
    )
    // A step past its idle deadline may have closed at the coordinator: a rollout after the gap must not join it.
    const overdue = () => this.idleDeadline !== undefined && Date.now() >= this.idleDeadline
    const unannounced = () =>
      this.epoch() === undefined ||
      this.announced?.step !== this.epoch() ||
      trainerStep > this.trainerStep() ||
      overdue()
    for (let tries = 0; tries < 3 && writes && unannounced(); tries++) await this.announce(trainerStep)
    const step = this.epoch()
    const pinned = step === undefined ? undefined : this.pinnedVersion(step)
    const answers: ShardAnswer[] = []
    let inserted = 0
    this.ctx.storage.transactionSync(() => {
      for (const submission of submissions) {
        const earlier = step === undefined ? undefined : this.entryFrom(step, earlierSteps, submission.rollout.id)
        if (earlier) answers.push({ kind: 'recorded', entry: earlier, duplicate: true })
        // Judged on another version than the step's (the isolate's copy moved on, or lags): judged again on the
        // step's, which the reply carries.
        else if (!submission.judged || step === undefined || submission.judged.rubricVersion !== pinned)
          answers.push({ kind: 'judge' })
        else {
          answers.push({ kind: 'recorded', entry: this.insert(step, submission), duplicate: false })
          inserted++
        }
      }
    })
    if (inserted > 0 || llm.length > 0) this.markDirty()
    const target = pinned === undefined ? snapshot : await this.snapshotOf(pinned)
    const needsSnapshot = knownVersion !== target.version || answers.some((answer) => answer.kind === 'judge')
    return {
      answers,
      ...(needsSnapshot ? { snapshot: target, ...(pinned === undefined ? {} : { pinned: true }) } : {}),
    }
  }

  /**
   * Sync mode: the final score of a rollout of a closed step, judged on the rubrics its step's update left
   * (`awaitUpdate`). The first settle of a rollout is kept and every later one answers it, as does a duplicate
   * request; once the step is archived its rows are final as they stand. Undefined when the row is gone.
   */
  async settle(step: number, rolloutId: string, judged: Judged): Promise<LedgerEntry | undefined> {
    const row = this.entry(step, rolloutId)
    if (!row || row.rubric_version === judged.rubricVersion) return row
    if (step <= this.meta.number('archived_through', -1) || judged.rubricVersion !== this.updateVersion(step))
      return row
    this.sql.exec(
      LEDGER_SQL.settle,
      judged.rubricVersion,
      judged.score,
      JSON.stringify(judged.criteria),
      judged.cached ? 1 : 0,
      judged.judgeModel,
      step,
      rolloutId,
    )
    if (step === this.epoch()) this.tally = undefined
    return this.entry(step, rolloutId)
  }

  /**
   * The shard learns that the coordinator closed `step`: rows of it past the first `keep` (by arrival) move to the next
   * step, and rollouts from now on belong to the next step. Idempotent. Answers with this shard's tally of its new step
   * and the LLM calls it has not reported yet, so the closed step's judge calls are counted before its update starts.
   */
  async learnClose(
    notice: CloseNotice,
  ): Promise<{ closed: ScoreTally; current: { step: number; tally: ScoreTally }; llm: LlmStat[] }> {
    this.applyCloses([notice])
    const llm = [...this.llm.values()]
    this.llm = new Map()
    return { closed: this.tallyOf(notice.step), current: { step: this.epoch()!, tally: this.currentTally() }, llm }
  }

  /**
   * The rollouts of a closed step in this shard, small: what the step update selects its analyses from. Applies the
   * close first (a shard that missed the notice must not hand over rollouts the step does not keep).
   */
  async stepRollouts(close: CloseNotice): Promise<StepRollout[]> {
    this.applyCloses([close])
    const { step } = close
    return this.sql
      .exec<StepRolloutRow>(LEDGER_SQL.stepRollouts, step)
      .toArray()
      .map((row) => ({
        shard: this.address.shard,
        rollout_id: row.rollout_id,
        step,
        rubric_version: row.rubric_version,
        score: row.score,
        group: row.grp,
        output_chars: row.output_chars,
        output_hash: row.output_hash,
        grades: Object.fromEntries(
          (JSON.parse(row.criteria) as { rubric_id: string; grade: number }[]).map((grade) => [
            grade.rubric_id,
            grade.grade,
          ]),
        ),
        tactics: row.tactics ? (JSON.parse(row.tactics) as string[]) : [],
        analysis: row.analysis ? (JSON.parse(row.analysis) as RolloutAnalysis) : null,
      }))
  }

  /** Recorded rollouts in full, for their analyses; ids no longer (or never) in the ledger are left out. */
  async rollouts(step: number, rolloutIds: readonly string[]): Promise<RecordedRollout[]> {
    return rolloutIds.flatMap((rolloutId) => {
      const row = this.sql
        .exec<EntryRow & { rollout: string; metadata: string }>(LEDGER_SQL.rollout, step, rolloutId)
        .toArray()[0]
      return row ? [{ entry: toEntry(row), rollout: JSON.parse(row.rollout), metadata: JSON.parse(row.metadata) }] : []
    })
  }

  /** Keeps how each rollout's analysis ended on its row; a repeat changes nothing. Returns how many rows changed. */
  async recordAnalyses(
    step: number,
    outcomes: readonly { rollout_id: string; analysis: RolloutAnalysis }[],
  ): Promise<number> {
    let changed = 0
    this.ctx.storage.transactionSync(() => {
      for (const { rollout_id, analysis } of outcomes) {
        changed += this.sql.exec(LEDGER_SQL.recordAnalysis, JSON.stringify(analysis), step, rollout_id).rowsWritten
      }
    })
    return changed
  }

  /**
   * A step's update committed: its rows may go once `retention` more updates have, and `snapshot` (the rubrics now in
   * force) replaces this shard's copy when newer.
   */
  async stepUpdated(step: number, snapshot: RubricSnapshot): Promise<void> {
    // The note of the update is also what says how far updates have committed (`updatedThrough`): one row written.
    if (this.updateVersion(step) === undefined) this.noteUpdate(step, snapshot.version)
    if (snapshot.version > (this.snapshotCache?.version ?? this.storedSnapshot()?.version ?? 0)) {
      this.meta.set('snapshot', JSON.stringify(snapshot))
      this.snapshotCache = snapshot
    }
    for (const waited of this.waiters.keys())
      if (waited <= step) this.waiters.release((key) => key === waited, await this.settleSnapshot(waited))
    await this.scheduleAlarm(0)
  }

  /**
   * Waits until the instance's update of `step` has committed and answers the rubrics then in force, or `undefined`
   * after `timeoutMs`. The sync-mode release: the snapshot travels with the wake-up, so waiters spread over the
   * shards cost no call when they are released.
   */
  async awaitUpdate(step: number, timeoutMs: number): Promise<RubricSnapshot | undefined> {
    if (this.updatedThrough() >= step) return this.settleSnapshot(step)
    return this.waiters.wait(step, timeoutMs, undefined)
  }

  /** Reports to the coordinator, writes closed steps to the archive, deletes steps past their retention. */
  override async alarm(): Promise<void> {
    await this.wakeUp.handle(() => this.runAlarm())
  }

  private async runAlarm(): Promise<void> {
    const address = this.address
    if (this.dirty) {
      try {
        await this.report(address)
      } catch (error) {
        console.error(`[${address.runId}/${address.instanceId}#${address.shard}] report failed; retrying`, error)
        await this.scheduleAlarm(this.reportIntervalMs())
        return
      }
    }
    await this.keepStorageBounded(address)
    if (this.dirty) await this.scheduleAlarm(this.reportIntervalMs())
  }

  private async report(address: ShardAddress): Promise<void> {
    const step = this.epoch()
    if (step === undefined) {
      this.dirty = false
      return
    }
    const llm = [...this.llm.values()]
    this.llm = new Map()
    this.dirty = false
    try {
      const reply = await this.coordinator(address).report({
        instanceId: address.instanceId,
        shard: address.shard,
        step,
        tally: this.currentTally(),
        llm,
      })
      this.applyReply(reply)
    } catch (error) {
      addLlmStats(this.llm, llm)
      this.dirty = true
      throw error
    }
  }

  private async keepStorageBounded(address: ShardAddress): Promise<void> {
    const step = this.epoch()
    const updatedThrough = this.updatedThrough()
    if (step === undefined || updatedThrough < 0) return
    const config = await loadRunConfig(this.env.DB, address.runId)
    if (!config) return
    let archivedThrough = this.meta.number('archived_through', -1)
    if (config.archive) {
      // Closed steps only, once their rows are final. In order, so a failed write is tried again before anything
      // after it.
      for (let closed = archivedThrough + 1; closed < step; closed++) {
        const settling = config.mode === 'sync' ? this.settlingUntil(closed, config.max_wait_s) : undefined
        if (settling !== undefined) {
          await this.scheduleAlarm(settling - Date.now())
          break
        }
        await this.archive(closed)
        this.meta.set('archived_through', (archivedThrough = closed))
      }
    }
    const deletable = Math.min(
      updatedThrough - config.ledger_retention_steps,
      config.archive ? archivedThrough : Infinity,
    )
    if (deletable > this.meta.number('deleted_through', -1)) {
      this.sql.exec(LEDGER_SQL.deleteThrough, deletable)
      this.meta.set('deleted_through', deletable)
    }
  }

  private async archive(step: number): Promise<void> {
    const address = this.address
    if (!this.env.ARCHIVE) throw new Error('the run archives its rollouts, but this Worker has no ARCHIVE bucket')
    const rows = this.sql
      .exec<EntryRow & { rollout: string; metadata: string; judge_model: string; created_at: number }>(
        LEDGER_SQL.archiveStep,
        step,
      )
      .toArray()
    if (rows.length === 0) return
    const lines = rows.map((row) => {
      const rollout = JSON.parse(row.rollout) as {
        id: string
        input: string
        output: string
        supplemental_context?: string | null
      }
      const line: ArchivedRollout = {
        run_id: address.runId,
        instance_id: address.instanceId,
        shard: address.shard,
        step: row.step,
        rollout_id: row.rollout_id,
        input: rollout.input,
        output: rollout.output,
        reference: rollout.supplemental_context ?? null,
        metadata: JSON.parse(row.metadata),
        score: row.score,
        criteria: JSON.parse(row.criteria),
        rubric_version: row.rubric_version,
        judge_model: row.judge_model,
        cached: row.cached === 1,
        scored_at: new Date(row.created_at).toISOString(),
      }
      return JSON.stringify(line)
    })
    await this.env.ARCHIVE.put(archiveKey(address, step), `${lines.join('\n')}\n`, {
      httpMetadata: { contentType: 'application/x-ndjson' },
    })
  }

  private insert(step: number, submission: Submission): LedgerEntry {
    const { rollout, metadata } = submission
    const judged = submission.judged!
    // Read before the row goes in: a tally rebuilt from the table afterwards would count it twice.
    const tally = this.currentTally()
    this.lastSeq = Math.max(this.lastSeq + 1, Date.now() * 1_024)
    this.sql.exec(
      LEDGER_SQL.insert,
      step,
      rollout.id,
      this.lastSeq,
      judged.rubricVersion,
      judged.score,
      judged.cached ? 1 : 0,
      fnv1a(rollout.input).toString(36),
      rollout.output.length,
      fnv1a(rollout.output).toString(36),
      submission.tactics?.length ? JSON.stringify(submission.tactics) : null,
      Date.now(),
      judged.judgeModel,
      JSON.stringify(judged.criteria),
      JSON.stringify(metadata),
      JSON.stringify(rollout),
    )
    addScore(tally, judged.score, judged.rubricVersion)
    return {
      rollout_id: rollout.id,
      step,
      rubric_version: judged.rubricVersion,
      score: judged.score,
      criteria: judged.criteria,
      cached: judged.cached,
    }
  }

  /**
   * Tells the coordinator this shard takes rollouts of `trainerStep` in its current step (or learns the step the run
   * is in, which a rollout past the step's trainer step may have just closed).
   */
  private async announce(trainerStep: number): Promise<void> {
    const address = this.address
    this.announcing ??= (async () => {
      try {
        const reply = await this.coordinator(address).announce(
          address.instanceId,
          address.shard,
          this.epoch() ?? -1,
          trainerStep,
          (await this.currentSnapshot()).version,
        )
        this.applyReply(reply)
        this.announced = { step: reply.step, version: reply.version ?? (await this.currentSnapshot()).version }
        // Kept for lookups after a restart, which have no announce of their own: the step's pin and the highest trainer
        // step announced in it, in one row; a repeated announce writes nothing.
        const pinned = `${reply.step}:${this.announced.version}:${Math.max(trainerStep, this.trainerStep())}`
        if (this.meta.get('pinned') !== pinned) this.meta.set('pinned', pinned)
      } finally {
        this.announcing = undefined
      }
    })()
    await this.announcing
  }

  private applyReply(reply: CoordinatorReply): void {
    this.idleDeadline = reply.idleDeadline
    this.applyCloses(reply.closes)
    const step = this.epoch()
    if (step === undefined || reply.step > step) this.setEpoch(reply.step)
  }

  private applyCloses(notices: readonly CloseNotice[]): void {
    for (const { step, keep } of [...notices].sort((a, b) => a.step - b.step)) {
      const current = this.epoch()
      if (current !== undefined && current > step) continue
      let moved = 0
      this.ctx.storage.transactionSync(() => {
        if (current === step && keep !== null) {
          moved = this.sql.exec<{ n: number }>(LEDGER_SQL.countPastCut, keep, step).one().n
          if (moved > 0) this.sql.exec(LEDGER_SQL.movePastCut, step, step, keep)
        }
        this.setEpoch(step + 1)
      })
      // The coordinator learns of moved rows from the next report, sent at once; the next rollout announces the shard
      // in its new step, which tells it the step's rubric version.
      this.announced = undefined
      if (moved > 0) {
        this.dirty = true
        void this.scheduleAlarm(0)
      }
    }
  }

  /** The rollout's entry in `step` or one of the `earlierSteps` before it, newest first. */
  private entryFrom(step: number, earlierSteps: number, rolloutId: string): LedgerEntry | undefined {
    for (let back = 0; back <= earlierSteps && step - back >= 0; back++) {
      const found = this.entry(step - back, rolloutId)
      if (found) return found
    }
    return undefined
  }

  private entry(step: number, rolloutId: string): LedgerEntry | undefined {
    const row = this.sql.exec<EntryRow>(LEDGER_SQL.entry, step, rolloutId).toArray()[0]
    return row && toEntry(row)
  }

  private currentTally(): ScoreTally {
    const step = this.epoch()
    return (this.tally ??= step === undefined ? emptyTally() : this.tallyOf(step))
  }

  private tallyOf(step: number): ScoreTally {
    const tally = emptyTally()
    for (const row of this.sql.exec<{ score: number; rubric_version: number }>(LEDGER_SQL.stepScores, step)) {
      addScore(tally, row.score, row.rubric_version)
    }
    return tally
  }

  private async currentSnapshot(): Promise<RubricSnapshot> {
    if (this.snapshotCache) return this.snapshotCache
    const stored = this.storedSnapshot()
    if (stored) return (this.snapshotCache = stored)
    const address = this.address
    const fetched = await this.env.RUBRIC_INSTANCE.getByName(instanceName(address.runId, address.instanceId)).snapshot()
    // Another call may have stored a newer one while this one waited.
    const again = this.storedSnapshot()
    if (again && again.version >= fetched.version) return (this.snapshotCache = again)
    this.meta.set('snapshot', JSON.stringify(fetched))
    return (this.snapshotCache = fetched)
  }

  private storedSnapshot(): RubricSnapshot | undefined {
    const stored = this.meta.get('snapshot')
    return stored === undefined ? undefined : (JSON.parse(stored) as RubricSnapshot)
  }

  /**
   * Sync mode: while a closed step's rows may still be settled (`settle`), the time to look again; undefined once
   * they are final: every row on the version the step's update left, or the trainer's wait (`max_wait_s`) over since
   * the update.
   */
  private settlingUntil(step: number, maxWaitS: number): number | undefined {
    const update = this.updates()[step]
    if (!update) return Date.now() + this.reportIntervalMs()
    const [version, at] = update
    const until = at + maxWaitS * 1_000
    if (Date.now() >= until) return undefined
    return this.sql.exec<{ n: number }>(LEDGER_SQL.unsettled, step, version).one().n > 0 ? until : undefined
  }

  /** The rubric version `step` is scored on, once the coordinator has told this shard. */
  private pinnedVersion(step: number): number | undefined {
    if (this.announced?.step === step) return this.announced.version
    const pinned = this.storedPin()
    return pinned.step === step ? pinned.version : undefined
  }

  /**
   * What the shard's last announce left in storage (`step:version:trainerStep`): the step, the rubric version it is
   * scored on and the highest trainer step announced in it. A shard from before the trainer step joined the pin keeps
   * it under `trainer_step` (`step:trainerStep`).
   */
  private storedPin(): { step: number; version: number; trainerStep: number } {
    const [step = -1, version = 0, trainerStep] = (this.meta.get('pinned') ?? '-1:0').split(':').map(Number)
    if (trainerStep !== undefined) return { step, version, trainerStep }
    const [legacyStep, legacyTrainerStep] = (this.meta.get('trainer_step') ?? '-1:-1').split(':').map(Number)
    return { step, version, trainerStep: legacyStep === step ? legacyTrainerStep! : -1 }
  }

  /**
   * The newest step whose update has committed here (-1 before any): the newest noted update, which `noteUpdate`
   * always keeps, or what a shard from before the notes kept under `updated_through`.
   */
  private updatedThrough(updates = this.updates()): number {
    return Math.max(this.meta.number('updated_through', -1), ...Object.keys(updates).map(Number))
  }

  /** The rubric version a step's update left (what sync mode settles the step's rollouts on), once it committed. */
  private updateVersion(step: number): number | undefined {
    return this.updates()[step]?.[0]
  }

  /** Each updated step still in the ledger: the version its update left and when this shard learned of it. */
  private updates(): Record<number, [version: number, at: number]> {
    return JSON.parse(this.meta.get('updates') ?? '{}')
  }

  private noteUpdate(step: number, version: number): void {
    const deleted = this.meta.number('deleted_through', -1)
    const updates = this.updates()
    const newest = this.updatedThrough(updates)
    // The newest note stays with its rows gone: it is what says how far updates have committed.
    const kept = Object.entries(updates).filter(([updated]) => Number(updated) > deleted || Number(updated) === newest)
    this.meta.set('updates', JSON.stringify(Object.fromEntries([...kept, [step, [version, Date.now()]]])))
  }

  /** The rubrics sync-mode rollouts of an updated step are settled on. */
  private async settleSnapshot(step: number): Promise<RubricSnapshot> {
    const version = this.updateVersion(step)
    return version === undefined ? this.currentSnapshot() : this.snapshotOf(version)
  }

  /** The rubrics of one version of this shard's instance: the newest this shard knows, or an older one it asks for. */
  private async snapshotOf(version: number): Promise<RubricSnapshot> {
    const current = await this.currentSnapshot()
    if (current.version === version) return current
    const held = this.olderSnapshots.get(version)
    if (held) return held
    const address = this.address
    const found = await this.env.RUBRIC_INSTANCE.getByName(instanceName(address.runId, address.instanceId)).versions([
      version,
    ])
    const rubrics = found[version]
    if (!rubrics) throw new Error(`instance ${address.instanceId} has no rubric version ${version}`)
    const snapshot = { instance_id: address.instanceId, version, rubrics }
    if (version > current.version) {
      this.meta.set('snapshot', JSON.stringify(snapshot))
      return (this.snapshotCache = snapshot)
    }
    this.olderSnapshots.set(version, snapshot)
    return snapshot
  }

  private markDirty(): void {
    this.dirty = true
    void this.scheduleAlarm(this.reportIntervalMs())
  }

  private async scheduleAlarm(delayMs: number): Promise<void> {
    await this.wakeUp.by(Date.now() + delayMs)
  }

  private reportIntervalMs(): number {
    const configured = Number(this.env.LEDGER_REPORT_MS)
    return Number.isFinite(configured) && configured > 0 ? configured : REPORT_INTERVAL_MS
  }

  /** The highest `metadata.current_step` this shard has announced in its current step (-1 before any). */
  private trainerStep(): number {
    const pinned = this.storedPin()
    return pinned.step === this.epoch() ? pinned.trainerStep : -1
  }

  private epoch(): number | undefined {
    const value = this.meta.get('step')
    return value === undefined ? undefined : Number(value)
  }

  private setEpoch(step: number): void {
    this.meta.set('step', step)
    this.tally = undefined
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

function toEntry(row: EntryRow): LedgerEntry {
  return {
    rollout_id: row.rollout_id,
    step: row.step,
    rubric_version: row.rubric_version,
    score: row.score,
    criteria: JSON.parse(row.criteria),
    cached: row.cached === 1,
  }
}
