import { pLimit } from '../../src/llm/index.ts'
import type { Alarm } from '../alarm.ts'
import { ledgerName } from '../names.ts'
import type { StepLifecycle } from './lifecycle.ts'
import type { StepRows } from './step-rows.ts'
import type { ShardRow } from './tables.ts'

/** Shards told of a close at once, at most (each is a subrequest of this invocation). */
const CLOSE_FAN_OUT = 32
/**
 * Shards one alarm tells of a close: with the step jobs' sends this keeps the alarm well under the 1,000 subrequests
 * of one invocation however many instances a step touched (a `per_instance` step of 512 prompts needs two alarms).
 */
const CLOSE_CALLS_PER_ALARM = 400

/**
 * Tells the ledger shards of closed steps (`LedgerShard.learnClose`), records what each holds, and starts a step's
 * updates once all of its shards know. Run by `/complete` and by the alarm; safe to run again.
 * @example await notices.tellShards()
 */
export class CloseNotices {
  constructor(
    private readonly env: Cloudflare.Env,
    private readonly runId: () => string,
    private readonly rows: StepRows,
    private readonly parts: { lifecycle: StepLifecycle; wakeUp: Alarm },
  ) {}

  /** Tells every shard of a closing step that has not confirmed yet; a step whose shards all know starts updating. */
  async tellShards(): Promise<void> {
    const runId = this.runId()
    const closing = this.rows.closing()
    const limit = pLimit(CLOSE_FAN_OUT)
    let budget = CLOSE_CALLS_PER_ALARM
    for (const step of closing) {
      const unacked = this.rows
        .shards(step)
        .filter((row) => row.acked === 0)
        .slice(0, budget)
      budget -= unacked.length
      await Promise.all(unacked.map((row) => limit(() => this.tellShard(runId, step, row))))
      if (this.rows.shards(step).some((row) => row.acked === 0)) {
        if (budget > 0) continue
        // The rest in the next alarm, at once.
        await this.parts.wakeUp.by(Date.now())
        break
      }
      this.parts.lifecycle.startUpdates(step)
    }
  }

  private async tellShard(runId: string, step: number, row: ShardRow): Promise<void> {
    try {
      const reply = await this.env.LEDGER.getByName(ledgerName(runId, row.instance_id, row.shard)).learnClose({ step })
      this.rows.confirmClose(step, row.instance_id, row.shard, reply.closed)
      // The shard's tally of the step it moved on to, when that is the collecting one.
      if (reply.current.tally.rollouts > 0 && reply.current.step === this.rows.collecting())
        this.rows.upsertShard(reply.current.step, row.instance_id, row.shard, reply.current.tally, row.last_at)
    } catch (error) {
      // The watchdog alarm tries again; the shard also learns of the close from its next report.
      console.error(`[${runId}] could not tell ${row.instance_id}#${row.shard} that step ${step} closed`, error)
    }
  }
}
