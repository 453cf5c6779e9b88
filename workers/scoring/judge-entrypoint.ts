import { WorkerEntrypoint } from 'cloudflare:workers'
import type { LlmCallRecord } from '../../src/llm/index.ts'
import type { Env } from '../env.ts'
import { judgeChunk, type ChunkOutcome, type JudgeChunk } from './fan-out.ts'
import { scoreRmChunk } from '../artifacts/serving.ts'
import type { JudgeService, RmChunk } from './judge-service.ts'
import { judgeOnRubrics } from './score-rollout.ts'

/**
 * Where a large batch's chunks are judged (`/score/batch`, the compat routes, `/rm/<target>/batch_score`): bound to
 * this same Worker as `JUDGE` (a service binding), so each chunk runs in an invocation of its own, with its own 6
 * connections; no URL reaches it.
 * @example const { outcomes } = await env.JUDGE.judge(chunk)
 */
export class JudgeEntrypoint extends WorkerEntrypoint<Env> implements JudgeService {
  /** Judges one chunk a request handed out, in order (see `judgeChunk`). */
  async judge(chunk: JudgeChunk): Promise<{ outcomes: ChunkOutcome[]; calls: LlmCallRecord[] }> {
    return judgeChunk(this.env, chunk, judgeOnRubrics)
  }

  /** Scores one chunk of a `/rm/<target>/batch_score` with the deployment's artifact, in order (see `scoreRmChunk`). */
  async scoreRm(chunk: RmChunk): Promise<object[]> {
    return scoreRmChunk(this.env, chunk)
  }
}
