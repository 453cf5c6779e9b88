import type { LlmCallRecord } from '../../src/llm/index.ts'
import type { ScoreResult } from '../../src/schemas/score.ts'
import type { Env } from '../env.ts'
import { countLlmCalls } from './llm-calls.ts'

/**
 * Per-event telemetry of a scoring request, which sees each of its LLM calls (a handed-out chunk's included): the
 * calls are counted towards the run's per-step sums (`countLlmCalls`, in the step of the request's newest recorded
 * result, else the step the run is collecting), and written to Workers Analytics Engine (`TELEMETRY`, bound in
 * production) with one data point per score served and per LLM call, indexed by run. Without the binding (local
 * development, tests) nothing is written there. Never blocks, never throws.
 * @example recordTelemetry(env, { runId, requestId, scores: [result], calls: models.calls }, c.executionCtx)
 */
export function recordTelemetry(
  env: Env,
  records: { runId: string; requestId: string; scores?: readonly ScoreResult[]; calls: readonly LlmCallRecord[] },
  context: Pick<ExecutionContext, 'waitUntil'>,
): number {
  const steps = (records.scores ?? []).map((score) => score.step)
  countLlmCalls(env, context, records.runId, steps.length ? Math.max(...steps) : null, records.calls)
  const dataset = env.TELEMETRY
  if (!dataset) return 0
  let points = 0
  try {
    for (const score of records.scores ?? []) {
      dataset.writeDataPoint({
        indexes: [records.runId],
        blobs: [
          'score',
          score.instance_id,
          score.rollout_id,
          records.requestId,
          score.duplicate ? 'duplicate' : score.cached ? 'cached' : 'judged',
        ],
        doubles: [score.score, score.step, score.rubric_version],
      })
      points++
    }
    for (const call of records.calls) {
      dataset.writeDataPoint({
        indexes: [records.runId],
        blobs: ['llm_call', call.role, call.model, call.outcome, records.requestId],
        doubles: [call.latency_ms, call.prompt_tokens, call.completion_tokens, call.attempt],
      })
      points++
    }
  } catch (error) {
    console.error('could not write telemetry', error)
  }
  return points
}
