import type { LlmCallRecord } from '../../src/llm/index.ts'
import type { StoredDeployment } from '../artifacts/store.ts'
import type { Env } from '../env.ts'
import type { ChunkOutcome } from './judgement.ts'
import type { ScoreRequest } from '../../src/schemas/rollout.ts'
import type { RunConfig } from '../../src/schemas/run-config.ts'
import type { RubricSnapshot } from '../../src/schemas/rubric.ts'

/** One judgement to make: the request, the rubrics (by instance) to judge it on, and the LLM calls it may spend. */
interface ChunkItem {
  instanceId: string
  request: ScoreRequest
  maxCalls: number
}

/** What a chunk carries to the invocation that judges it: everything, so it reads nothing. */
export interface JudgeChunk {
  runId: string
  config: RunConfig
  requestId: string
  snapshots: Record<string, RubricSnapshot>
  items: ChunkItem[]
}

/** Items of one `batch_score`, with the deployment that serves them: what a handed-out chunk carries. */
export interface RmChunk {
  deployment: StoredDeployment
  requestId: string
  items: { index: number; raw: unknown }[]
}

/**
 * What `JudgeEntrypoint` answers over the `JUDGE` service binding. Callers type the binding with this contract rather
 * than with the entrypoint class, so the routes that hand chunks out never import the module that judges them.
 */
export interface JudgeService extends Rpc.WorkerEntrypointBranded {
  /** Judges one chunk a request handed out, in order. */
  judge(chunk: JudgeChunk): Promise<{ outcomes: ChunkOutcome[]; calls: LlmCallRecord[] }>
  /** Scores one chunk of a `/rm/<target>/batch_score` with the deployment's artifact, in order. */
  scoreRm(chunk: RmChunk): Promise<object[]>
}

/**
 * This Worker's own `JudgeEntrypoint` through the `JUDGE` binding, or undefined where none is bound. wrangler types
 * cannot tell that production's service binding points back at the same script, so it types that one as a bare
 * `Service`; this says what it answers.
 * @example const judge = judgeService(env); if (judge) await judge.judge(chunk)
 */
export function judgeService(env: Env): Service<JudgeService> | undefined {
  return env.JUDGE as Service<JudgeService> | undefined
}
