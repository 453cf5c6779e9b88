import type { LlmCallRecord } from '../../src/llm/index.ts'
import type { ScoreResult } from '../../src/schemas/score.ts'
import { Outbox } from '../outbox/index.ts'

/** What one request (or queue job) did: the scores it served and every LLM call it made. */
export interface RequestRecords {
  runId: string
  requestId: string
  scores?: readonly ScoreResult[]
  calls: readonly LlmCallRecord[]
}

const SCORE_EVENT_COLUMNS = ['run_id', 'instance_id', 'rollout_id', 'step', 'rubric_version', 'score', 'criteria', 'cached', 'duplicate', 'request_id', 'created_at']
const LLM_CALL_COLUMNS = ['run_id', 'role', 'model', 'outcome', 'latency_ms', 'prompt_tokens', 'completion_tokens', 'request_id', 'created_at']

/**
 * Writes records to D1 now: one INSERT per table whatever the row count, the rows bound as a single
 * JSON array and unpacked by `json_each` (D1 allows 100 bound parameters per statement).
 * @example await writeRecords(env.DB, [{ runId, requestId: 'analysis:3:r1', calls }])
 */
export async function writeRecords(db: D1Database, batch: readonly RequestRecords[]): Promise<void> {
  const now = new Date().toISOString()
  const events = batch.flatMap((records) => (records.scores ?? []).map((s) => [
    records.runId, s.instance_id, s.rollout_id, s.step, s.rubric_version, s.score, JSON.stringify(s.criteria), s.cached ? 1 : 0, s.duplicate ? 1 : 0, records.requestId, now,
  ]))
  const calls = batch.flatMap((records) => records.calls.map((call) => [
    records.runId, call.role, call.model, call.outcome, call.latency_ms, call.prompt_tokens, call.completion_tokens, records.requestId, call.at,
  ]))
  const statements = [
    ...(events.length > 0 ? [insertRows(db, 'score_events', SCORE_EVENT_COLUMNS, events)] : []),
    ...(calls.length > 0 ? [insertRows(db, 'llm_calls', LLM_CALL_COLUMNS, calls)] : []),
  ]
  if (statements.length > 0) await db.batch(statements)
}

function insertRows(db: D1Database, table: string, columns: readonly string[], rows: unknown[][]): D1PreparedStatement {
  const values = columns.map((_, index) => `value->>${index}`).join(', ')
  return db.prepare(`INSERT INTO ${table} (${columns.join(', ')}) SELECT ${values} FROM json_each(?)`).bind(JSON.stringify(rows))
}

/** The isolate's outbox of D1 rows for `/score` and the compatible scoring surfaces. */
export const scoreRecords = new Outbox<D1Database, RequestRecords>({ what: 'request records to D1', maxItems: 64, flushAfterMs: 100, write: writeRecords })
