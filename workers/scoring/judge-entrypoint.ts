import { WorkerEntrypoint } from 'cloudflare:workers'
import type { LlmCallRecord } from '../../src/llm/index.ts'
import type { Env } from '../env.ts'
import type { JudgeChunk } from './judge-service.ts'
import { scoreRmChunk } from '../artifacts/serving.ts'
import { judgeOutcome, type ChunkOutcome } from './judgement.ts'
import type { JudgeService, RmChunk } from './judge-service.ts'
import { requestModels } from './models.ts'

/**
 * Where a large batch's chunks are judged (`/score/batch`, the compat routes, `/rm/<target>/batch_score`): bound to
 * this same Worker as `JUDGE` (a service binding), so each chunk runs in an invocation of its own, with its own 6
 * connections; no URL reaches it.
 * @example const { outcomes } = await env.JUDGE.judge(chunk)
 */
export class JudgeEntrypoint extends WorkerEntrypoint<Env> implements JudgeService {
  /**
   * Judges one chunk a request handed out (`judgeUnits`), with this invocation's own models, in order; an item whose
   * model fails carries its error. Answers the LLM calls made: the requesting invocation counts them with its own.
   */
  async judge(chunk: JudgeChunk): Promise<{ outcomes: ChunkOutcome[]; calls: LlmCallRecord[] }> {
    const models = requestModels(this.env, chunk.config)
    const scorer = models.forRole('scorer')
    const outcomes = await Promise.all(
      chunk.items.map(async (item): Promise<ChunkOutcome> => {
        const snapshot = chunk.snapshots[item.instanceId]
        if (!snapshot) return internal(`no rubrics were sent for instance ${item.instanceId}`)
        try {
          return await judgeOutcome(scorer, chunk.config, snapshot, item.request, item.maxCalls)
        } catch (error) {
          console.error(`[${chunk.requestId}] a judgement of a handed-out chunk failed`, error)
          return internal('the judgement failed')
        }
      }),
    )
    return { outcomes, calls: models.calls }
  }

  /** Scores one chunk of a `/rm/<target>/batch_score` with the deployment's artifact, in order (see `scoreRmChunk`). */
  async scoreRm(chunk: RmChunk): Promise<object[]> {
    return scoreRmChunk(this.env, chunk)
  }
}

/** An `internal` failure of one item, as the chunk's reply carries it. */
function internal(message: string): ChunkOutcome {
  return { ok: false, error: { code: 'internal', message, status: 500 }, calls: 0 }
}
