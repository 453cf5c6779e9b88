import type { Judgement } from '../../src/agents/scorer/index.ts'
import { AppError, type ErrorCode } from '../../src/errors/index.ts'
import type { LlmCallRecord } from '../../src/llm/index.ts'
import type { ScoreRequest } from '../../src/schemas/rollout.ts'
import type { RunConfig } from '../../src/schemas/run-config.ts'
import type { RubricSnapshot } from '../../src/schemas/rubric.ts'
import type { Env } from '../env.ts'
import { requestModels, type RoleModel } from './models.ts'

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

/** One judgement to make: the request and the rubrics (by instance) to judge it on. */
interface ChunkItem {
  instanceId: string
  request: ScoreRequest
}

/** What a chunk carries to the invocation that judges it: everything, so it reads nothing. */
export interface JudgeChunk {
  runId: string
  config: RunConfig
  requestId: string
  snapshots: Record<string, RubricSnapshot>
  items: ChunkItem[]
}

/** An AppError as it crosses an RPC boundary. */
export interface WireError {
  code: ErrorCode
  message: string
  status: number
  details?: unknown
  retryAfterSeconds?: number
}

export type ChunkOutcome = { ok: true; judgement: Judgement } | { ok: false; error: WireError }

/** How a chunk's items are judged where it lands (scoring's `judge`, given the invocation's own models). */
export type JudgeFn = (
  scorer: RoleModel,
  config: RunConfig,
  snapshot: RubricSnapshot,
  request: ScoreRequest,
) => Promise<Judgement>

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
 * its own 6 connections; a chunk whose invocation fails runs `here`, slower but not lost. Results in input order.
 * @example const outcomes = await handOut(groups, judgeHere, (part) => env.JUDGE!.judge(chunkOf(part)), requestId)
 */
export async function handOut<T, R>(
  items: readonly T[],
  here: (part: readonly T[]) => Promise<R[]>,
  away: ((part: T[]) => Promise<R[]>) | undefined,
  requestId: string,
): Promise<R[]> {
  if (!away || items.length <= LOCAL_JUDGEMENTS) return here(items)
  const parts = await Promise.all(
    chunksOf(items).map(async (part) => {
      try {
        return await away(part)
      } catch (error) {
        console.error(`[${requestId}] a handed-out chunk of ${part.length} failed; running it here`, error)
        return here(part)
      }
    }),
  )
  return parts.flat()
}

/**
 * One judgement as a chunk reports it: the judgement, or the model's failure (an AppError) as a wire error; any
 * other error is thrown.
 * @example const outcome = await judgeOutcome(judge, scorer, config, snapshot, request)
 */
export async function judgeOutcome(
  judge: JudgeFn,
  scorer: RoleModel,
  config: RunConfig,
  snapshot: RubricSnapshot,
  request: ScoreRequest,
): Promise<ChunkOutcome> {
  try {
    return { ok: true, judgement: await judge(scorer, config, snapshot, request) }
  } catch (error) {
    if (error instanceof AppError) return { ok: false, error: toWire(error) }
    throw error
  }
}

/**
 * Judges a chunk in this invocation, with its own models (so its own 6 connections), in order; an item whose model
 * fails carries its error. Answers the LLM calls made, for the caller's accounting.
 * @example const { outcomes, calls } = await judgeChunk(env, chunk, judge)
 */
export async function judgeChunk(
  env: Env,
  chunk: JudgeChunk,
  judge: JudgeFn,
): Promise<{ outcomes: ChunkOutcome[]; calls: LlmCallRecord[] }> {
  const models = requestModels(env, chunk.config)
  const scorer = models.forRole('scorer')
  const outcomes = await Promise.all(
    chunk.items.map(async (item): Promise<ChunkOutcome> => {
      const snapshot = chunk.snapshots[item.instanceId]
      if (!snapshot)
        return {
          ok: false,
          error: toWire(new AppError('internal', `no rubrics were sent for instance ${item.instanceId}`)),
        }
      try {
        return await judgeOutcome(judge, scorer, chunk.config, snapshot, item.request)
      } catch (error) {
        console.error(`[${chunk.requestId}] a judgement of a handed-out chunk failed`, error)
        return { ok: false, error: toWire(new AppError('internal', 'the judgement failed')) }
      }
    }),
  )
  return { outcomes, calls: models.calls }
}

/**
 * @example toWire(new AppError('llm_unavailable', 'down', { retryAfterSeconds: 5 }))
 */
function toWire(error: AppError): WireError {
  return {
    code: error.code,
    message: error.message,
    status: error.status,
    ...(error.details === undefined ? {} : { details: error.details }),
    ...(error.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: error.retryAfterSeconds }),
  }
}

/**
 * @example fromWire({ code: 'llm_unavailable', message: 'down', status: 503 }) instanceof AppError // true
 */
export function fromWire(error: WireError): AppError {
  return new AppError(error.code, error.message, {
    status: error.status,
    ...(error.details === undefined ? {} : { details: error.details }),
    ...(error.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: error.retryAfterSeconds }),
  })
}
