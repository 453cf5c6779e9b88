import type { LlmCallRecord } from '../../src/llm/index.ts'
import type { ScoreResult } from '../../src/schemas/score.ts'

/** What one request (or queue job) did: the scores it served and every LLM call it made. */
export interface RequestRecords {
  runId: string
  requestId: string
  scores?: readonly ScoreResult[]
  calls: readonly LlmCallRecord[]
}

/** Extends the life of the invocation until the promise settles (`executionCtx.waitUntil`). */
export type Defer = (work: Promise<unknown>) => void

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

/**
 * Rows waiting for D1, shared by the requests one isolate serves: a request adds its rows and returns;
 * they are written together once `maxRecords` are waiting or `flushAfterMs` after the first of them,
 * always inside some request's `waitUntil`, so no row waits on a request that may never come.
 * Writing per request cost more CPU than the rest of `/score` (BENCHMARKS.md, issue 2).
 */
export class RecordOutbox {
  private waiting: RequestRecords[] = []
  private db: D1Database | undefined
  private scheduled = false

  constructor(private readonly options: { maxRecords: number; flushAfterMs: number }) {}

  /**
   * Queues one request's records; `defer` keeps the invocation alive until they are written.
   * @example outbox.add(env.DB, { runId, requestId, scores: [score], calls }, (p) => c.executionCtx.waitUntil(p))
   */
  add(db: D1Database, records: RequestRecords, defer: Defer): void {
    if ((records.scores?.length ?? 0) === 0 && records.calls.length === 0) return
    this.db = db
    this.waiting.push(records)
    if (this.waiting.length >= this.options.maxRecords) {
      defer(this.flush())
    } else if (!this.scheduled) {
      this.scheduled = true
      defer(new Promise((resolve) => setTimeout(resolve, this.options.flushAfterMs)).then(() => this.flush()))
    }
  }

  /** Writes everything waiting now. Never throws: a failed write is logged with what it lost. */
  async flush(): Promise<void> {
    this.scheduled = false
    const batch = this.waiting
    const db = this.db
    this.waiting = []
    if (!db || batch.length === 0) return
    try {
      await writeRecords(db, batch)
    } catch (error) {
      console.error(`could not write ${batch.length} request records to D1`, error)
    }
  }
}

/** The isolate's outbox for `/score` and the compatible scoring surfaces. */
export const scoreRecords = new RecordOutbox({ maxRecords: 64, flushAfterMs: 100 })
