import type { LlmCallRecord } from '../../src/llm/index.ts'
import { addLlmStats, type LlmStat } from '../../src/llm/stats.ts'
import type { Env } from '../env.ts'
import { objects } from '../objects/call.ts'

/** How long a run's calls gather in an isolate before they go to its coordinator: at most one call per second. */
const FLUSH_DELAY_MS = 1_000

/** A run's calls not yet handed to its coordinator, summed per step (`''`: the step the run is collecting). */
interface Pending {
  steps: Map<string, Map<string, LlmStat>>
  /** Set from the first call after a flush until the next flush starts. */
  scheduled: boolean
}

/** Per isolate: what each run's requests made here and its coordinator has not stored yet. */
const pending = new Map<string, Pending>()

/**
 * Counts a request's LLM calls towards its run's per-step sums (`GET /llm_calls`, the dashboard): added here, and
 * handed to the run's coordinator (`addLlmCalls`) at most once a second per run per isolate. The first call after a
 * quiet spell schedules the flush a second later on the request's `waitUntil`, so a run's last calls go too; a flush
 * that fails keeps its sums for the next. `step` is the step the request's results were recorded in (null: none
 * were, so the step the run is collecting).
 * @example countLlmCalls(c.env, c.executionCtx, run.id, 3, models.calls)
 */
export function countLlmCalls(
  env: Env,
  context: Pick<ExecutionContext, 'waitUntil'>,
  runId: string,
  step: number | null,
  calls: readonly (LlmCallRecord | LlmStat)[],
): void {
  if (calls.length === 0) return
  const run = pending.get(runId) ?? { steps: new Map(), scheduled: false }
  pending.set(runId, run)
  add(run, step, calls)
  if (run.scheduled) return
  run.scheduled = true
  context.waitUntil(new Promise((resolve) => setTimeout(resolve, FLUSH_DELAY_MS)).then(() => flush(env, runId)))
}

/** Hands a run's sums to its coordinator; on failure they are added back, for the next flush to carry. */
async function flush(env: Env, runId: string): Promise<void> {
  const run = pending.get(runId)
  if (!run) return
  pending.delete(runId)
  const batches = [...run.steps].map(([step, sums]) => ({
    step: step === '' ? null : Number(step),
    stats: [...sums.values()],
  }))
  try {
    await objects.coordinator(env, runId, (coordinator) => coordinator.addLlmCalls(batches))
  } catch (error) {
    console.error(`could not hand run ${runId}'s LLM call counts to its coordinator; kept for the next flush`, error)
    // Kept, not retried from here: the run's next request schedules the flush that carries them.
    const kept = pending.get(runId) ?? { steps: new Map(), scheduled: false }
    pending.set(runId, kept)
    for (const { step, stats } of batches) add(kept, step, stats)
  }
}

function add(run: Pending, step: number | null, calls: readonly (LlmCallRecord | LlmStat)[]): void {
  const key = step === null ? '' : String(step)
  const sums = run.steps.get(key) ?? new Map<string, LlmStat>()
  run.steps.set(key, sums)
  addLlmStats(sums, calls)
}
