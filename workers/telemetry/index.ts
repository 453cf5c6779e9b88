import type { LlmCallRecord } from '../../src/llm/index.ts'
import type { ScoreResult } from '../../src/schemas/score.ts'
import type { Env } from '../env.ts'

/**
 * Per-event telemetry to Workers Analytics Engine (`TELEMETRY`, bound in production): one data point per score
 * served and per LLM call, indexed by run. Without the binding (local development, tests) nothing is written: the
 * per-step aggregates the coordinator keeps are what the dashboard reads either way. Never blocks, never throws.
 * @example recordTelemetry(env, { runId, requestId, scores: [result], calls: models.calls })
 */
export function recordTelemetry(
  env: Env,
  records: { runId: string; requestId: string; scores?: readonly ScoreResult[]; calls: readonly LlmCallRecord[] },
): number {
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
