import type { Judgement } from '../../src/agents/scorer/index.ts'
import { AppError } from '../../src/errors/index.ts'
import { pLimit, type LlmCallRecord } from '../../src/llm/index.ts'
import type { ScoreRequest } from '../../src/schemas/rollout.ts'
import type { RunConfig } from '../../src/schemas/run-config.ts'
import type { RubricSnapshot } from '../../src/schemas/rubric.ts'
import type { Env } from '../env.ts'
import { judgeOutcome, type ChunkOutcome, type WireError } from './judgement.ts'
import { judgeService } from './judge-service.ts'
import type { RoleModel } from './models.ts'

/**
 * Most rollouts one batch request may carry (`/score/batch`, `/compat/openrlhf`): a trainer sends a GRPO step's whole
 * batch in one request, and 8,192 rollouts is the largest step we serve (spread over {@link MAX_CHUNKS} chunks, about
 * 274 one-call judgements each). A bigger step is split by the trainer (OpenRLHF: more reward URLs).
 */
export const MAX_ROLLOUTS_PER_BATCH = 8_192
/** Judgements a request makes in its own invocation; more are handed out in chunks (6 connections each). */
const LOCAL_JUDGEMENTS = 24
/**
 * Most chunks one request hands out: a request may reach at most 32 Worker invocations through service bindings
 * (itself included), so 1,024 judgements go out as 30 chunks of 34 or 35, each judged as many at a time as the
 * scorer's `concurrency` and `max_concurrent_llm_calls` allow (4 by default).
 */
const MAX_CHUNKS = 30

/**
 * Splits `items` into at most {@link MAX_CHUNKS} chunks whose sizes differ by at most one, none smaller than
 * {@link LOCAL_JUDGEMENTS} unless there are fewer items.
 * @example chunksOf(Array.from({ length: 1024 }, (_, i) => i)).length // 30
 */
function chunksOf<T>(items: readonly T[]): T[][] {
  const count = Math.max(1, Math.min(MAX_CHUNKS, Math.floor(items.length / LOCAL_JUDGEMENTS)))
  // The first `items.length % count` chunks take one item more, so sizes differ by at most one.
  const size = Math.floor(items.length / count)
  const larger = items.length % count
  const chunks: T[][] = []
  for (let index = 0, start = 0; index < count; index++) {
    const end = start + size + (index < larger ? 1 : 0)
    chunks.push(items.slice(start, end))
    start = end
  }
  return chunks
}

/**
 * Runs `items` in this invocation (`here`) when they are few or nothing can take chunks (`away` undefined: the
 * Worker has no `JUDGE` binding), else in chunks ({@link chunksOf}) each handed `away` to another invocation, with
 * its own 6 connections. A chunk whose invocation fails runs `here`, slower but not lost; or, given `lost`, answers
 * that for its items: a budget of calls per item (`budgets.judge_calls_per_rollout`) may have been spent by the chunk
 * before it failed, and judging them again here would spend it twice. Results in input order.
 * @example const outcomes = await handOut(units, judgeHere, (part) => judge.judge(chunkOf(part)), requestId, lost)
 */
export async function handOut<T, R>(
  items: readonly T[],
  here: (part: readonly T[]) => Promise<R[]>,
  away: ((part: T[]) => Promise<R[]>) | undefined,
  requestId: string,
  lost?: (item: T) => R,
): Promise<R[]> {
  if (!away || items.length <= LOCAL_JUDGEMENTS) return here(items)
  const parts = await Promise.all(
    chunksOf(items).map(async (part) => {
      try {
        return await away(part)
      } catch (error) {
        console.error(`[${requestId}] a handed-out chunk of ${part.length} failed`, error)
        return lost ? part.map(lost) : here(part)
      }
    }),
  )
  return parts.flat()
}

/** What a rollout of a handed-out chunk that failed is answered: retry after the delay. */
const LOST_CHUNK = {
  code: 'overloaded' as const,
  message: 'the invocation judging this item failed; retry after the delay (what was recorded is not judged again)',
  retryAfterSeconds: 1,
}

/** Judgements one invocation makes at once; LLM calls are capped separately by the run's `max_concurrent_llm_calls`. */
const ITEM_CONCURRENCY = 16

/** What judging needs of the request: its run, its scorer, where its LLM calls are counted. */
export interface JudgingScope {
  env: Env
  run: { id: string; config: RunConfig }
  scorer: RoleModel
  /** The request's LLM calls: a handed-out chunk's calls are added when its reply comes back. */
  calls: LlmCallRecord[]
  requestId: string
}

/**
 * One distinct judgement to make: a request, the rubrics (of its instance) to judge it on, and the LLM calls it may
 * spend (what is left of its rollout's `budgets.judge_calls_per_rollout`).
 */
export interface JudgeUnit {
  instanceId: string
  snapshot: RubricSnapshot
  request: ScoreRequest
  maxCalls: number
}

/** A unit's judgement, or the error (a model's failure) that kept it from one; either way the LLM calls it spent. */
export type UnitOutcome = ({ ok: true; judgement: Judgement } | { ok: false; error: AppError }) & { calls: number }

/**
 * Judges each unit once, in order: in this invocation when there are few (or the Worker has no `JUDGE` binding), else
 * in chunks handed to other invocations of this Worker, each with its own 6 connections, so a batch of 1,024 with
 * the scorer's default concurrency (4) takes about 1,024 ÷ 120 judge latencies instead of 1,024 ÷ 4. A model's
 * failure is that unit's outcome; the others still count.
 * @example const outcomes = await judgeUnits(scope, [{ instanceId: 'global', snapshot, request, maxCalls: 8 }])
 */
export async function judgeUnits(scope: JudgingScope, units: readonly JudgeUnit[]): Promise<UnitOutcome[]> {
  const judge = judgeService(scope.env)
  const outcomes = await handOut(
    units,
    (part) => judgeHere(scope, part),
    judge &&
      (async (part) => {
        // The RPC stub's inferred type loses the reply's shape; JudgeService says what it is.
        const reply: { outcomes: ChunkOutcome[]; calls: LlmCallRecord[] } = await judge.judge({
          runId: scope.run.id,
          config: scope.run.config,
          requestId: scope.requestId,
          snapshots: Object.fromEntries(part.map((unit) => [unit.instanceId, unit.snapshot])),
          items: part.map(({ instanceId, request, maxCalls }) => ({ instanceId, request, maxCalls })),
        })
        scope.calls.push(...reply.calls)
        return reply.outcomes
      }),
    scope.requestId,
    // Its calls may be spent already: the trainer's retry judges it afresh, and what was recorded costs it nothing.
    (): ChunkOutcome => ({ ok: false, error: { ...LOST_CHUNK, status: 503 }, calls: 0 }),
  )
  return outcomes.map((outcome) =>
    outcome.ok ? outcome : { ok: false, error: fromWire(outcome.error), calls: outcome.calls },
  )
}

/** Judges units in this invocation, {@link ITEM_CONCURRENCY} at a time, with the request's own scorer. */
function judgeHere(scope: JudgingScope, units: readonly JudgeUnit[]): Promise<ChunkOutcome[]> {
  const limit = pLimit(ITEM_CONCURRENCY)
  return Promise.all(
    units.map((unit) =>
      limit(() => judgeOutcome(scope.scorer, scope.run.config, unit.snapshot, unit.request, unit.maxCalls)),
    ),
  )
}

/**
 * @example fromWire({ code: 'llm_unavailable', message: 'down', status: 503 }) instanceof AppError // true
 */
function fromWire(error: WireError): AppError {
  return new AppError(error.code, error.message, {
    status: error.status,
    ...(error.details === undefined ? {} : { details: error.details }),
    ...(error.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: error.retryAfterSeconds }),
  })
}
