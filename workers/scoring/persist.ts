import { drizzle } from 'drizzle-orm/d1'
import { llmCalls, scoreEvents } from '../../src/db/schema.ts'
import type { LlmCallRecord } from '../../src/llm/index.ts'
import type { ScoreResult } from '../../src/schemas/score.ts'

/** D1 allows 100 bound parameters per statement; an llm_calls row binds 10. */
const CALL_ROWS_PER_INSERT = 9

/**
 * Writes what a request did to D1: its score event (if it produced one) and every LLM call it made.
 * Runs after the response (waitUntil), so D1 latency never reaches the trainer.
 * @example c.executionCtx.waitUntil(persistRequestRecords(env.DB, { runId, requestId, score, calls }))
 */
export async function persistRequestRecords(
  db: D1Database,
  records: { runId: string; requestId: string; score?: ScoreResult; calls: readonly LlmCallRecord[] },
): Promise<void> {
  if (!records.score && records.calls.length === 0) return
  const orm = drizzle(db)
  const now = new Date().toISOString()
  const statements = []
  if (records.score) {
    const s = records.score
    statements.push(orm.insert(scoreEvents).values({
      runId: records.runId, instanceId: s.instance_id, rolloutId: s.rollout_id, step: s.step, rubricVersion: s.rubric_version,
      score: s.score, criteria: s.criteria, cached: s.cached, duplicate: s.duplicate, requestId: records.requestId, createdAt: now,
    }))
  }
  for (let start = 0; start < records.calls.length; start += CALL_ROWS_PER_INSERT) {
    const rows = records.calls.slice(start, start + CALL_ROWS_PER_INSERT).map((call) => ({
      runId: records.runId, role: call.role, model: call.model, outcome: call.outcome, latencyMs: call.latency_ms,
      promptTokens: call.prompt_tokens, completionTokens: call.completion_tokens, requestId: records.requestId, createdAt: call.at,
    }))
    statements.push(orm.insert(llmCalls).values(rows))
  }
  const [first, ...rest] = statements
  if (first) await orm.batch([first, ...rest])
}
