import type { ArchivedRollout } from '../../src/schemas/archive.ts'
import type { Rollout } from '../../src/schemas/rollout.ts'
import type { RunConfig } from '../../src/schemas/run-config.ts'
import type { ShardAddress } from '../contracts.ts'
import type { MetaStore } from '../meta-store.ts'
import { archiveKey } from '../names.ts'
import { type EntryRow, LEDGER_SQL } from './tables.ts'
import type { LedgerRows } from './rows.ts'
import type { ShardSteps } from './steps.ts'

type ArchiveRow = EntryRow & { rollout: string; metadata: string; judge_model: string; created_at: number }

/**
 * Keeps a shard's storage bounded: closed steps go to R2 once their rows are final (when the run archives), and a
 * step's rows are deleted `ledger_retention_steps` committed updates after it (and only once archived). Run by the
 * shard's alarm; in step order, so a failed write is tried again before anything after it.
 * @example const next = await retention.run(address, config) // when to look again, if a step is still settling
 */
export class Retention {
  constructor(
    private readonly sql: SqlStorage,
    private readonly meta: MetaStore,
    private readonly steps: ShardSteps,
    private readonly rows: LedgerRows,
    private readonly bucket: () => R2Bucket | undefined,
  ) {}

  /** Archives and deletes what may go; answers when to run again while a sync step is still being settled. */
  async run(
    address: ShardAddress,
    loadConfig: () => Promise<RunConfig | undefined>,
    settleCheckMs: number,
  ): Promise<number | undefined> {
    const current = this.steps.current()
    const updatedThrough = this.steps.updatedThrough()
    if (current === undefined || updatedThrough < 0) return undefined
    const config = await loadConfig()
    if (!config) return undefined
    let archivedThrough = this.meta.number('archived_through', -1)
    let again: number | undefined
    if (config.archive) {
      for (let closed = archivedThrough + 1; closed < current; closed++) {
        again = config.mode === 'sync' ? this.settlingUntil(closed, config.max_wait_s, settleCheckMs) : undefined
        if (again !== undefined) break
        await this.archive(address, closed)
        this.meta.set('archived_through', (archivedThrough = closed))
      }
    }
    const deletable = Math.min(
      updatedThrough - config.ledger_retention_steps,
      config.archive ? archivedThrough : Infinity,
    )
    if (deletable > this.meta.number('deleted_through', -1)) {
      this.rows.deleteThrough(deletable)
      this.steps.forgetThrough(deletable)
      this.meta.set('deleted_through', deletable)
    }
    return again
  }

  /** Whether `step`'s rows are final: archived (they are then as they stand), never settled again. */
  isArchived(step: number): boolean {
    return step <= this.meta.number('archived_through', -1)
  }

  /**
   * Sync mode: while a closed step's rows may still be settled, the time to look again; undefined once they are
   * final: every row on the version the step's update left, or the trainer's wait (`max_wait_s`) over since it.
   */
  private settlingUntil(step: number, maxWaitS: number, settleCheckMs: number): number | undefined {
    const update = this.steps.update(step)
    if (!update) return Date.now() + settleCheckMs
    const until = update.at + maxWaitS * 1_000
    if (Date.now() >= until) return undefined
    return this.rows.unsettled(step, update.version) > 0 ? until : undefined
  }

  private async archive(address: ShardAddress, step: number): Promise<void> {
    const bucket = this.bucket()
    if (!bucket) throw new Error('the run archives its rollouts, but this Worker has no ARCHIVE bucket')
    const rows = this.sql.exec<ArchiveRow>(LEDGER_SQL.archiveStep, step).toArray()
    if (rows.length === 0) return
    const lines = rows.map((row) => JSON.stringify(archived(address, row)))
    await bucket.put(archiveKey(address, step), `${lines.join('\n')}\n`, {
      httpMetadata: { contentType: 'application/x-ndjson' },
    })
  }
}

function archived(address: ShardAddress, row: ArchiveRow): ArchivedRollout {
  const rollout = JSON.parse(row.rollout) as Pick<Rollout, 'input' | 'output' | 'supplemental_context' | 'messages'>
  return {
    run_id: address.runId,
    instance_id: address.instanceId,
    shard: address.shard,
    step: row.step,
    rollout_id: row.rollout_id,
    input: rollout.input,
    output: rollout.output,
    reference: rollout.supplemental_context ?? null,
    ...(rollout.messages ? { messages: rollout.messages } : {}),
    metadata: JSON.parse(row.metadata),
    score: row.score,
    criteria: JSON.parse(row.criteria),
    rubric_version: row.rubric_version,
    judge_model: row.judge_model,
    cached: row.cached === 1,
    scored_at: new Date(row.created_at).toISOString(),
  }
}
