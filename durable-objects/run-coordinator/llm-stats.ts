import type { LlmStat } from '../contracts.ts'

/** Adds a row's counts to the one already stored under the same step, role, model and outcome. */
const ADD_ON_CONFLICT = `ON CONFLICT (step, role, model, outcome) DO UPDATE SET calls = calls + excluded.calls,
           latency_ms = latency_ms + excluded.latency_ms, prompt_tokens = prompt_tokens + excluded.prompt_tokens,
           completion_tokens = completion_tokens + excluded.completion_tokens`

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
        `INSERT INTO llm_stats (step, role, model, outcome, calls, latency_ms, prompt_tokens, completion_tokens)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)
         ${ADD_ON_CONFLICT}`,
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
    return this.sql
      .exec<LlmStat & Record<string, SqlStorageValue>>(
        `SELECT role, model, outcome, sum(calls) AS calls, sum(latency_ms) AS latency_ms,
           sum(prompt_tokens) AS prompt_tokens, sum(completion_tokens) AS completion_tokens
         FROM llm_stats GROUP BY role, model, outcome ORDER BY role, model, outcome`,
      )
      .toArray()
  }

  /** Folds the per-step sums of steps 0 to `oldest` into step -1's. */
  foldThrough(oldest: number): void {
    this.sql.exec(
      `INSERT INTO llm_stats (step, role, model, outcome, calls, latency_ms, prompt_tokens, completion_tokens)
         SELECT -1, role, model, outcome, sum(calls), sum(latency_ms), sum(prompt_tokens), sum(completion_tokens)
         FROM llm_stats WHERE step BETWEEN 0 AND ? GROUP BY role, model, outcome
         ${ADD_ON_CONFLICT}`,
      oldest,
    )
    this.sql.exec('DELETE FROM llm_stats WHERE step BETWEEN 0 AND ?', oldest)
  }
}
