import { DurableObject } from 'cloudflare:workers'
import type { RunConfig } from '../../src/schemas/run-config.ts'
import type { RubricStatus, StepStatus } from '../../src/schemas/status.ts'
import type { Env } from '../../workers/env.ts'
import type { StepJob } from '../../workers/queues/messages.ts'
import type { StepUpdateOutcome } from '../rubric-instance/index.ts'
import { loadRunConfig } from '../../workers/runs/store.ts'
import { MetaStore } from '../meta-store.ts'
import { applySchema, type TableSchema } from '../schema.ts'
import { instanceName } from '../names.ts'

/** How often the alarm looks for step jobs that never reported back. */
const STEP_WATCHDOG_MS = 15_000
/** A step job silent this long past its analysis deadline is sent again. */
const STEP_RESEND_AFTER_MS = 120_000

type StepRow = { step: number; status: Exclude<StepStatus, 'idle'>; rollouts: number }

/** One step as the dashboard's timeline shows it (`RunCoordinator.timeline`). */
export interface StepTimelineEntry {
  step: number
  status: Exclude<StepStatus, 'idle'>
  rollouts: number
  opened_at: string
  closed_at: string | null
  updated_at: string | null
  instances: { instance_id: string; rubric_version: number; rollouts: number; update: StepUpdateOutcome | null }[]
}

const COORDINATOR_TABLES: Record<string, TableSchema> = {
  steps: {
    columns: { step: 'INTEGER PRIMARY KEY', status: 'TEXT NOT NULL', rollouts: 'INTEGER NOT NULL DEFAULT 0', opened_at: 'TEXT NOT NULL', closed_at: 'TEXT', updated_at: 'TEXT' },
  },
  members: {
    columns: { step: 'INTEGER NOT NULL', instance_id: 'TEXT NOT NULL', rollout_id: 'TEXT NOT NULL' },
    constraints: ['PRIMARY KEY (step, instance_id, rollout_id)'],
  },
  step_instances: {
    columns: {
      step: 'INTEGER NOT NULL', instance_id: 'TEXT NOT NULL', rubric_version: 'INTEGER NOT NULL', rollouts: 'INTEGER NOT NULL DEFAULT 0',
      updated: 'INTEGER NOT NULL DEFAULT 0', enqueued_at: 'INTEGER', outcome: 'TEXT',
    },
    constraints: ['PRIMARY KEY (step, instance_id)'],
  },
}

interface Waiter {
  isDone: () => boolean
  resolve: (done: boolean) => void
}

/**
 * One per run: the step counter, which instances took part in each step and with how many distinct
 * rollouts, step completion, and the waiters of `/rubric_status/wait` and sync-mode `/score`.
 * A closed step's updates run from an alarm, never inside the request that closed it.
 */
export class RunCoordinator extends DurableObject<Env> {
  private readonly sql: SqlStorage
  private readonly meta: MetaStore
  private readonly waiters = new Set<Waiter>()
  private config: RunConfig | undefined

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env)
    this.sql = ctx.storage.sql
    this.meta = new MetaStore(this.sql)
    applySchema(this.sql, COORDINATOR_TABLES)
  }

  /**
   * Counts a rollout into the collecting step, once per (instance, rollout id), and closes the step
   * when the run's `rollouts_per_step` is reached. Returns the step the rollout belongs to.
   */
  async admit(runId: string, instanceId: string, rolloutId: string, rubricVersion: number): Promise<{ step: number; nextStep?: number }> {
    const config = await this.runConfig(runId)
    const step = this.collectingStep()
    this.sql.exec(`INSERT OR IGNORE INTO steps (step, status, opened_at) VALUES (?, 'collecting', ?)`, step, new Date().toISOString())
    const added = this.sql.exec('INSERT OR IGNORE INTO members (step, instance_id, rollout_id) VALUES (?, ?, ?)', step, instanceId, rolloutId).rowsWritten
    if (added > 0) {
      this.sql.exec('UPDATE steps SET rollouts = rollouts + 1 WHERE step = ?', step)
      this.sql.exec(
        `INSERT INTO step_instances (step, instance_id, rubric_version, rollouts) VALUES (?, ?, ?, 1)
         ON CONFLICT (step, instance_id) DO UPDATE SET rollouts = rollouts + 1, rubric_version = max(rubric_version, excluded.rubric_version)`,
        step, instanceId, rubricVersion,
      )
      this.noteVersion(rubricVersion)
      const rollouts = this.sql.exec<{ rollouts: number }>('SELECT rollouts FROM steps WHERE step = ?', step).one().rollouts
      if (config.rollouts_per_step !== null && rollouts >= config.rollouts_per_step) {
        await this.closeStep(runId, step, instanceId)
        return { step, nextStep: step + 1 }
      }
    }
    return { step }
  }

  /** The trainer's "step done": closes the collecting step, or `noop` when the run closes steps by count. */
  async complete(runId: string): Promise<{ status: 'complete' | 'noop'; step: number; closed: boolean }> {
    const config = await this.runConfig(runId)
    const step = this.collectingStep()
    if (config.rollouts_per_step !== null) return { status: 'noop', step, closed: false }
    const row = this.stepRow(step)
    if (!row || row.rollouts === 0) return { status: 'complete', step, closed: false }
    await this.closeStep(runId, step)
    return { status: 'complete', step, closed: true }
  }

  /** Where the run stands, without waiting. */
  async status(runId: string): Promise<RubricStatus> {
    const config = await this.runConfig(runId)
    const reported = this.reportedStep()
    const instances = reported
      ? this.sql
          .exec<{ instance_id: string; rubric_version: number; rollouts: number; updated: number; outcome: string | null }>(
            'SELECT instance_id, rubric_version, rollouts, updated, outcome FROM step_instances WHERE step = ? ORDER BY instance_id', reported.step,
          )
          .toArray()
      : []
    const outcomes = instances.flatMap((row) => (row.outcome ? [JSON.parse(row.outcome) as StepUpdateOutcome] : []))
    const total = (key: 'analysed' | 'late' | 'failed' | 'missing' | 'hacking_flags') => outcomes.reduce((sum, outcome) => sum + outcome[key], 0)
    return {
      run_id: runId,
      step: reported?.step ?? 0,
      status: reported?.status ?? 'idle',
      rubric_version: this.meta.number('max_version', 1),
      instances: instances.map(({ instance_id, rubric_version, rollouts, outcome }) => ({
        instance_id,
        rubric_version,
        rollouts,
        ...(outcome ? { update: JSON.parse(outcome) as StepUpdateOutcome } : {}),
      })),
      analyses: { analysed: total('analysed'), late: total('late'), failed: total('failed'), missing: total('missing') },
      hacking_flags: total('hacking_flags'),
      pending: reported?.status === 'updating' ? instances.filter((row) => row.updated === 0).length : 0,
      rollouts: reported?.rollouts ?? 0,
      mode: config.mode,
    }
  }

  /**
   * Every step of the run, oldest first (at most the newest `limit`), with each touched instance's rollouts and
   * update outcome: the dashboard's step timeline. A read only.
   */
  async timeline(limit = 200): Promise<StepTimelineEntry[]> {
    const steps = this.sql
      .exec<{ step: number; status: StepTimelineEntry['status']; rollouts: number; opened_at: string; closed_at: string | null; updated_at: string | null }>(
        'SELECT step, status, rollouts, opened_at, closed_at, updated_at FROM steps ORDER BY step DESC LIMIT ?', limit,
      )
      .toArray()
      .reverse()
    const first = steps[0]?.step ?? 0
    const instances = this.sql
      .exec<{ step: number; instance_id: string; rubric_version: number; rollouts: number; outcome: string | null }>(
        'SELECT step, instance_id, rubric_version, rollouts, outcome FROM step_instances WHERE step >= ? ORDER BY step, instance_id', first,
      )
      .toArray()
    return steps.map((row) => ({
      ...row,
      instances: instances
        .filter((instance) => instance.step === row.step)
        .map(({ instance_id, rubric_version, rollouts, outcome }) => ({ instance_id, rubric_version, rollouts, update: outcome ? (JSON.parse(outcome) as StepUpdateOutcome) : null })),
    }))
  }

  /** Every instance that has taken part in the run, with its newest known rubric version. */
  async instances(): Promise<{ instance_id: string; rubric_version: number; rollouts: number }[]> {
    return this.sql
      .exec<{ instance_id: string; rubric_version: number; rollouts: number }>(
        'SELECT instance_id, max(rubric_version) AS rubric_version, sum(rollouts) AS rollouts FROM step_instances GROUP BY instance_id ORDER BY instance_id',
      )
      .toArray()
  }

  /**
   * Waits until the step the trainer is waiting on has finished updating: the oldest updating step,
   * else the collecting step if it has rollouts. Returns at once when nothing is pending.
   */
  async waitForUpdate(runId: string, timeoutMs: number): Promise<{ done: boolean; status: RubricStatus }> {
    const updating = this.sql.exec<{ step: number }>(`SELECT step FROM steps WHERE status = 'updating' ORDER BY step LIMIT 1`).toArray()[0]
    const collecting = this.stepRow(this.collectingStep())
    const target = updating?.step ?? (collecting && collecting.rollouts > 0 ? collecting.step : undefined)
    const done = target === undefined ? true : await this.waitForStep(target, timeoutMs)
    return { done, status: await this.status(runId) }
  }

  /** Resolves true once `step` is updated, false when `timeoutMs` passes first. */
  async waitForStep(step: number, timeoutMs: number): Promise<boolean> {
    const isDone = () => this.stepRow(step)?.status === 'updated'
    if (isDone()) return true
    return new Promise<boolean>((resolve) => {
      const waiter: Waiter = {
        isDone,
        resolve: (done) => {
          clearTimeout(timer)
          this.waiters.delete(waiter)
          resolve(done)
        },
      }
      const timer = setTimeout(() => waiter.resolve(false), timeoutMs)
      this.waiters.add(waiter)
    })
  }

  /**
   * Hands each closed step's instance updates to the step queue, and re-sends any that have not
   * reported back well past their deadline (a lost message or a reset must not stall a step).
   * Safe to run again: the step jobs are idempotent.
   */
  override async alarm(): Promise<void> {
    const runId = this.meta.get('run_id')
    if (!runId) return
    const config = await this.runConfig(runId)
    const deadlineMs = config.analysis_deadline_s * 1_000
    const now = Date.now()
    const pending = this.sql
      .exec<{ step: number; instance_id: string; enqueued_at: number | null; closed_at: string }>(
        `SELECT si.step, si.instance_id, si.enqueued_at, s.closed_at FROM step_instances si JOIN steps s ON s.step = si.step
         WHERE s.status = 'updating' AND si.updated = 0 ORDER BY si.step, si.instance_id`,
      )
      .toArray()
    const jobs: { body: StepJob }[] = []
    for (const row of pending) {
      const deadline = Date.parse(row.closed_at) + deadlineMs
      if (row.enqueued_at !== null && now < Math.max(row.enqueued_at, deadline) + STEP_RESEND_AFTER_MS) continue
      jobs.push({ body: { type: 'step', runId, instanceId: row.instance_id, step: row.step, deadline } })
    }
    for (let start = 0; start < jobs.length; start += 100) {
      const batch = jobs.slice(start, start + 100)
      await this.env.STEP_QUEUE.sendBatch(batch)
      // Marked only once sent: a failed send throws, and the alarm's retry sends the job again.
      for (const { body } of batch) this.sql.exec('UPDATE step_instances SET enqueued_at = ? WHERE step = ? AND instance_id = ?', now, body.step, body.instanceId)
    }
    if (pending.length > 0) await this.ctx.storage.setAlarm(now + STEP_WATCHDOG_MS)
  }

  /** An instance reports its step update done; the step is updated when every touched instance has. */
  async instanceUpdated(runId: string, step: number, instanceId: string, outcome: StepUpdateOutcome): Promise<{ stepUpdated: boolean }> {
    await this.runConfig(runId)
    this.sql.exec(
      'UPDATE step_instances SET updated = 1, rubric_version = ?, outcome = ? WHERE step = ? AND instance_id = ?',
      outcome.rubric_version, JSON.stringify(outcome), step, instanceId,
    )
    this.noteVersion(outcome.rubric_version)
    const remaining = this.sql.exec<{ n: number }>('SELECT count(*) AS n FROM step_instances WHERE step = ? AND updated = 0', step).one().n
    if (remaining === 0) {
      this.sql.exec(`UPDATE steps SET status = 'updated', updated_at = coalesce(updated_at, ?) WHERE step = ?`, new Date().toISOString(), step)
      this.wakeWaiters()
    }
    return { stepUpdated: remaining === 0 }
  }

  /**
   * Closes a step and moves every touched instance to the next one before returning, so a rollout id
   * reused right after the close is a new rollout of the next step, not a duplicate. `closedBy` (the
   * instance whose rollout closed the step) moves itself from `admit`'s answer.
   */
  private async closeStep(runId: string, step: number, closedBy?: string): Promise<void> {
    this.sql.exec(`UPDATE steps SET status = 'updating', closed_at = ? WHERE step = ? AND status = 'collecting'`, new Date().toISOString(), step)
    this.meta.set('collecting_step', step + 1)
    const touched = this.sql.exec<{ instance_id: string }>('SELECT instance_id FROM step_instances WHERE step = ?', step).toArray()
    await this.ctx.storage.setAlarm(Date.now())
    await Promise.all(
      touched
        .filter(({ instance_id }) => instance_id !== closedBy)
        .map(({ instance_id }) => this.env.RUBRIC_INSTANCE.getByName(instanceName(runId, instance_id)).openStep(step + 1)),
    )
  }

  private collectingStep(): number {
    return this.meta.number('collecting_step', 0)
  }

  /** The step `/rubric_status` describes: an updating one first, then the collecting one, then the last updated. */
  private reportedStep(): StepRow | undefined {
    const updating = this.sql.exec<StepRow>(`SELECT step, status, rollouts FROM steps WHERE status = 'updating' ORDER BY step LIMIT 1`).toArray()[0]
    if (updating) return updating
    const collecting = this.stepRow(this.collectingStep())
    if (collecting && collecting.rollouts > 0) return collecting
    return this.sql.exec<StepRow>(`SELECT step, status, rollouts FROM steps WHERE status = 'updated' ORDER BY step DESC LIMIT 1`).toArray()[0]
  }

  private stepRow(step: number): StepRow | undefined {
    return this.sql.exec<StepRow>('SELECT step, status, rollouts FROM steps WHERE step = ?', step).toArray()[0]
  }

  private wakeWaiters(): void {
    for (const waiter of this.waiters) if (waiter.isDone()) waiter.resolve(true)
  }

  private noteVersion(version: number): void {
    if (version > this.meta.number('max_version', 1)) this.meta.set('max_version', version)
  }

  private async runConfig(runId: string): Promise<RunConfig> {
    if (this.config) return this.config
    const config = await loadRunConfig(this.env.DB, runId)
    if (!config) throw new Error(`run "${runId}" does not exist`)
    if (!this.meta.get('run_id')) this.meta.set('run_id', runId)
    return (this.config = config)
  }

}
