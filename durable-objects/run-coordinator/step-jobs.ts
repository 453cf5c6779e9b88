import type { UpdateProgress } from '../../src/schemas/status.ts'
import type { StepJob } from '../contracts.ts'
import { COORDINATOR_SQL } from './statements.ts'

/**
 * A running step job silent this long is sent again. A running job says it is alive every 15 s (`alive`), so only a
 * job whose Worker died goes quiet this long, never a slow update (a real judge on a CPU takes minutes). A job never
 * heard from may be waiting in a queue backlog: it is sent again after this, then twice as long each time, up to
 * `STEP_RESEND_MAX_MS`, and a copy that finds another run of it at work does nothing (`claim`).
 */
const STEP_RESEND_AFTER_MS = 180_000
const STEP_RESEND_MAX_MS = 3_600_000
/** Messages per `sendBatch`: the queue's limit. */
const QUEUE_BATCH = 100

type PendingUpdate = {
  step: number
  instance_id: string
  enqueued_at: number | null
  sends: number
  alive_at: number | null
  rollouts: number
  status: string
  skipped: string | null
}

/**
 * The instances' step updates, sent as jobs on the step queue: one at a time per instance, in step order, and sent
 * again when one has not reported back well past its time (a lost message or a reset must not stall a step).
 * @example await jobs.sendDue(Date.now())
 */
export class StepJobs {
  constructor(
    private readonly sql: SqlStorage,
    private readonly env: Cloudflare.Env,
    private readonly runId: () => string,
  ) {}

  /** Sends each instance's oldest update that is due: never sent, or sent and silent too long. */
  async sendDue(now: number): Promise<void> {
    const pending = this.sql.exec<PendingUpdate>(COORDINATOR_SQL.pendingUpdates).toArray()
    // One update at a time per instance, in step order: a later step's job waits for the earlier one's commit.
    const oldest = new Map<string, PendingUpdate>()
    for (const row of pending) if (!oldest.has(row.instance_id)) oldest.set(row.instance_id, row)
    const jobs: StepJob[] = [...oldest.values()]
      .filter((row) => row.status === 'updating' && isDue(row, now))
      .map((row) => ({
        type: 'step',
        runId: this.runId(),
        instanceId: row.instance_id,
        step: row.step,
        shards: this.closedShards(row.step, row.instance_id),
        ...(row.sends > 0 ? { resends: row.sends } : {}),
        ...(row.skipped ? { skip: { budget: row.skipped, rollouts: row.rollouts } } : {}),
      }))
    for (let start = 0; start < jobs.length; start += QUEUE_BATCH) {
      const batch = jobs.slice(start, start + QUEUE_BATCH)
      await this.env.STEP_QUEUE.sendBatch(batch.map((body) => ({ body })))
      // Marked only once sent: a failed send throws, and the alarm's retry sends the job again.
      for (const job of batch) this.sql.exec(COORDINATOR_SQL.markEnqueued, now, job.step, job.instanceId)
    }
  }

  /**
   * A running job's note that it is still working, with how far it has got: its silence counts from now. Only a job
   * that was sent and whose step is still updating counts (a late note from a finished job changes nothing).
   */
  alive(step: number, instanceId: string, now: number, progress?: UpdateProgress): void {
    this.sql.exec(COORDINATOR_SQL.markAlive, now, progress ? JSON.stringify(progress) : null, step, instanceId)
  }

  /**
   * A job that may have a twin (sent again, or long in the queue) claims its update before it works: false when the
   * instance's update is done or a run of another message of the job said it is at work within
   * `STEP_RESEND_AFTER_MS` (a retry of the claiming message itself may go on); else the claim counts as that run's
   * note that it is at work.
   */
  claim(step: number, instanceId: string, messageId: string, now: number): boolean {
    const row = this.sql
      .exec<{ updated: number; alive_at: number | null; claimed_by: string | null }>(
        COORDINATOR_SQL.stepInstance,
        step,
        instanceId,
      )
      .toArray()[0]
    if (!row || row.updated === 1) return false
    const twinAtWork = row.alive_at !== null && now < row.alive_at + STEP_RESEND_AFTER_MS
    if (twinAtWork && row.claimed_by !== messageId) return false
    this.sql.exec(COORDINATOR_SQL.claimJob, now, messageId, step, instanceId)
    return true
  }

  /** The shards of an instance that took part in a closed step: what its update reads. */
  private closedShards(step: number, instanceId: string): StepJob['shards'] {
    return this.sql.exec<{ shard: number }>(COORDINATOR_SQL.closedShards, step, instanceId).toArray()
  }
}

/**
 * Whether a step job is to be sent (again): never sent; at work and silent for `STEP_RESEND_AFTER_MS`; or never heard
 * from for that window doubled per send so far (a queue backlog gets few copies).
 * @example isDue({ enqueued_at: 0, sends: 1, alive_at: null }, 180_000) // true
 * @internal
 */
export function isDue(row: Pick<PendingUpdate, 'enqueued_at' | 'sends' | 'alive_at'>, now: number): boolean {
  if (row.enqueued_at === null) return true
  if (row.alive_at !== null && row.alive_at >= row.enqueued_at) return now >= row.alive_at + STEP_RESEND_AFTER_MS
  const wait = Math.min(STEP_RESEND_MAX_MS, STEP_RESEND_AFTER_MS * 2 ** Math.max(0, row.sends - 1))
  return now >= row.enqueued_at + wait
}
