import type { LlmCallRecord } from './compose.ts'

/** LLM calls of one role, model and outcome, summed: what the dashboard's per-step call view reads. */
export interface LlmStat {
  role: string
  model: string
  outcome: string
  calls: number
  latency_ms: number
  prompt_tokens: number
  completion_tokens: number
}

/**
 * Adds stats (or single call records) into `sums`, keyed by role, model and outcome.
 * @example const sums = new Map(); addLlmStats(sums, models.calls); [...sums.values()]
 */
export function addLlmStats(sums: Map<string, LlmStat>, items: readonly (LlmStat | LlmCallRecord)[]): void {
  for (const item of items) {
    const key = `${item.role}\u0000${item.model}\u0000${item.outcome}`
    const sum = sums.get(key) ?? {
      role: item.role,
      model: item.model,
      outcome: item.outcome,
      calls: 0,
      latency_ms: 0,
      prompt_tokens: 0,
      completion_tokens: 0,
    }
    sum.calls += 'calls' in item ? item.calls : 1
    sum.latency_ms += item.latency_ms
    sum.prompt_tokens += item.prompt_tokens
    sum.completion_tokens += item.completion_tokens
    sums.set(key, sum)
  }
}

/**
 * LLM call records summed by role, model and outcome.
 * @example llmStats(models.calls) // [{ role: 'analyzer', model: 'mock', outcome: 'ok', calls: 8, … }]
 */
export function llmStats(calls: readonly LlmCallRecord[]): LlmStat[] {
  const sums = new Map<string, LlmStat>()
  addLlmStats(sums, calls)
  return [...sums.values()]
}
