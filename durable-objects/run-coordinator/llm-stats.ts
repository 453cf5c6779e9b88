import type { LlmStat } from '../contracts.ts'
import { COORDINATOR_SQL } from './tables.ts'

/**
 * The run's LLM calls by step, role, model and outcome (`llm_stats`), as the shards and the instances' updates report
 * them; step -1 holds the sums of the steps whose detail is gone.
 * @example stats.add(3, reply.llm); stats.totals() // [{ role: 'judge', model: 'm', outcome: 'ok', calls: 4, … }]
 */
export class LlmStats {
  constructor(private readonly sql: SqlStorage) {}

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
