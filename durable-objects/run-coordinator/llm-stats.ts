import type { LlmStat } from '../contracts.ts'
import { COORDINATOR_SQL } from './statements.ts'

/** How long the coordinator remembers a batch of LLM calls it took (ms): longer than an isolate keeps one to resend. */
const LLM_BATCH_MEMORY_MS = 60 * 60_000

/**
 * The run's LLM calls by step, role, model and outcome (`llm_stats`), as the shards and the instances' updates report
 * them; step -1 holds the sums of the steps whose detail is gone.
 * @example stats.add(3, reply.llm); stats.totals() // [{ role: 'judge', model: 'm', outcome: 'ok', calls: 4, … }]
 */
export class LlmStats {
  constructor(private readonly sql: SqlStorage) {}

  /**
   * Whether the batch of calls `batchId` is new (it is remembered from now on), so a batch sent again adds nothing.
   * Ids start with their time (ms, 13 digits): those older than `LLM_BATCH_MEMORY_MS` are forgotten as new ones come.
   */
  claimBatch(batchId: string, now = Date.now()): boolean {
    const oldest = String(now - LLM_BATCH_MEMORY_MS).padStart(13, '0')
    if (batchId < oldest) return false
    this.sql.exec(COORDINATOR_SQL.forgetLlmBatches, oldest)
    return this.sql.exec(COORDINATOR_SQL.claimLlmBatch, batchId).rowsWritten > 0
  }

  add(step: number, stats: readonly LlmStat[]): void {
    for (const stat of stats) {
      this.sql.exec(
        COORDINATOR_SQL.addLlmStat,
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

  /** LLM calls of the run by role, model and outcome, summed over its steps. */
  totals(): LlmStat[] {
    return this.sql.exec<LlmStat & Record<string, SqlStorageValue>>(COORDINATOR_SQL.llmTotals).toArray()
  }

  /** Folds the per-step sums of steps 0 to `oldest` into step -1's. */
  foldThrough(oldest: number): void {
    this.sql.exec(COORDINATOR_SQL.foldLlmStats, oldest)
    this.sql.exec(COORDINATOR_SQL.forgetLlmStatsThrough, oldest)
  }
}
