import type { StepJob } from '../contracts.ts'
import { COORDINATOR_SQL } from './tables.ts'

/**
 * A step job silent this long is sent again. A running job says it is alive once a minute (`alive`), so only a lost
 * message or a job whose Worker died goes quiet this long, never a slow update (a real judge on a CPU takes minutes).
 */
const STEP_RESEND_AFTER_MS = 180_000
/** Messages per `sendBatch`: the queue's limit. */
const QUEUE_BATCH = 100

type PendingUpdate = {
  step: number
  instance_id: string
  enqueued_at: number | null
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
      .filter(
        (row) =>
          row.status === 'updating' && (row.enqueued_at === null || now >= row.enqueued_at + STEP_RESEND_AFTER_MS),
      )
      .map((row) => ({
        type: 'step',
        runId: this.runId(),
        instanceId: row.instance_id,
        step: row.step,
        shards: this.closedShards(row.step, row.instance_id),
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
   * A running job's note that it is still working: its silence counts from now. Only a job that was sent and whose
   * step is still updating counts (a late note from a finished job changes nothing).
   */
  alive(step: number, instanceId: string, now: number): void {
    this.sql.exec(COORDINATOR_SQL.markAlive, now, step, instanceId)
  }

  /** The shards of an instance that took part in a closed step: what its update reads. */
  private closedShards(step: number, instanceId: string): StepJob['shards'] {
    return this.sql.exec<{ shard: number }>(COORDINATOR_SQL.closedShards, step, instanceId).toArray()
  }
}
