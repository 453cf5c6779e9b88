import type { LlmCallRecord } from '../../src/llm/index.ts'
import { addLlmStats, type LlmStat } from '../../src/llm/stats.ts'
import type { Env } from '../env.ts'
import { objects } from '../objects/call.ts'

/** How long a run's calls gather in an isolate before they go to its coordinator: at most one call per second. */
const FLUSH_DELAY_MS = 1_000
/** Times one batch is sent before it waits for the run's next flush, and the wait before each retry (ms). */
const SEND_DELAYS_MS = [0, 1_000, 3_000]
/**
 * How long a batch that could not be handed over is kept for the run's next flush: the coordinator remembers the
 * batches it took for `LLM_BATCH_MEMORY_MS`, so one sent again within it is never counted twice.
 */
const KEEP_UNSENT_MS = 30 * 60_000

/** Sums of one flush, under the id that makes handing them over idempotent. */
interface Batch {
  id: string
  createdAt: number
  steps: { step: number | null; stats: LlmStat[] }[]
}

/** A run's calls not yet handed to its coordinator, summed per step (`''`: the step the run is collecting). */
interface Pending {
  steps: Map<string, Map<string, LlmStat>>
  /** Batches whose sending failed: sent again as they are (same id), never merged into a new one. */
  unsent: Batch[]
  /** Set from the first call after a flush until the next flush starts. */
  scheduled: boolean
}

/** Per isolate: what each run's requests made here and its coordinator has not stored yet. */
const pending = new Map<string, Pending>()

/**
 * Counts a request's LLM calls towards its run's per-step sums (`GET /llm_calls`, the dashboard): added here, and
 * handed to the run's coordinator (`addLlmCalls`) at most once a second per run per isolate. The first call after a
 * quiet spell schedules the flush a second later on the request's `waitUntil`, so a run's last calls go too. Each
 * flush is a batch with an id the coordinator remembers, so a batch sent again (a retry after a lost reply, a reset)
 * is counted once; a failed send is tried again on a timer, and after that by the run's next flush here.
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
  const run = pendingOf(runId)
  add(run, step, calls)
  if (run.scheduled) return
  run.scheduled = true
  context.waitUntil(new Promise((resolve) => setTimeout(resolve, FLUSH_DELAY_MS)).then(() => flush(env, runId)))
}

/** Hands a run's sums to its coordinator as a new batch, with the batches not handed over before. */
async function flush(env: Env, runId: string): Promise<void> {
  const run = pendingOf(runId)
  run.scheduled = false
  const batches = run.unsent.filter((batch) => Date.now() - batch.createdAt < KEEP_UNSENT_MS)
  run.unsent = []
  if (run.steps.size > 0) {
    batches.push({
      id: `${Date.now().toString().padStart(13, '0')}-${crypto.randomUUID()}`,
      createdAt: Date.now(),
      steps: [...run.steps].map(([step, sums]) => ({
        step: step === '' ? null : Number(step),
        stats: [...sums.values()],
      })),
    })
    run.steps.clear()
  }
  await Promise.all(
    batches.map(async (batch) => {
      if (!(await send(env, runId, batch))) pendingOf(runId).unsent.push(batch)
    }),
  )
  const left = pending.get(runId)
  if (left && left.steps.size === 0 && left.unsent.length === 0 && !left.scheduled) pending.delete(runId)
}

async function send(env: Env, runId: string, batch: Batch): Promise<boolean> {
  for (const delay of SEND_DELAYS_MS) {
    if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay))
    try {
      await objects.coordinator(env, runId, (coordinator) => coordinator.addLlmCalls(batch.id, batch.steps))
      return true
    } catch (error) {
      console.error(`could not hand run ${runId}'s LLM call counts to its coordinator (batch ${batch.id})`, error)
    }
  }
  return false
}

function pendingOf(runId: string): Pending {
  let run = pending.get(runId)
  if (!run) pending.set(runId, (run = { steps: new Map(), unsent: [], scheduled: false }))
  return run
}

function add(run: Pending, step: number | null, calls: readonly (LlmCallRecord | LlmStat)[]): void {
  const key = step === null ? '' : String(step)
  const sums = run.steps.get(key) ?? new Map<string, LlmStat>()
  run.steps.set(key, sums)
  addLlmStats(sums, calls)
}
