import { judgeRollout, judgementKey, type Judgement } from '../../src/agents/scorer/index.ts'
import { AppError } from '../../src/errors/index.ts'
import { instanceIdForInput } from '../../src/hash/index.ts'
import { LlmError } from '../../src/llm/index.ts'
import type { ScoreRequest } from '../../src/schemas/rollout.ts'
import type { RubricSnapshot } from '../../src/schemas/rubric.ts'
import type { RunConfig } from '../../src/schemas/run-config.ts'
import type { ScoreResult } from '../../src/schemas/score.ts'
import { coordinatorName, instanceName } from '../../durable-objects/names.ts'
import { againAfterReset } from '../../durable-objects/reset.ts'
import type { Preparation, RubricInstance } from '../../durable-objects/rubric-instance/index.ts'
import type { Env } from '../env.ts'
import { Outbox } from '../outbox/index.ts'
import { sendAnalysisJobs, type AnalysisJob } from '../queues/messages.ts'
import type { RoleModel } from './models.ts'

/**
 * Rollouts of async-mode scores waiting for their analysis job: sent together (one send per job cost 0.3 ms of a
 * /score's 1.9), up to 6 rollouts of one instance per message (a sixth of the queue operations, BENCHMARKS.md).
 */
export const pendingAnalyses = new Outbox<Queue<AnalysisJob>, AnalysisJob>({
  what: 'analysis jobs',
  maxItems: 64,
  flushAfterMs: 100,
  write: sendAnalysisJobs,
})

export interface ScoreContext {
  env: Env
  run: { id: string; config: RunConfig }
  scorer: RoleModel
  requestId: string
  /** Work to finish after the response (the route passes `executionCtx.waitUntil`). */
  defer: (work: Promise<unknown>) => void
}

/**
 * The `/score` flow: resolve the instance → ask it for an earlier score, a cached judgement or the
 * rubric snapshot → judge with the LLM only when needed → record once per (step, rollout id).
 * In sync mode, hold the answer until the step's update is done and re-judge on newer rubrics.
 * @example const result = await scoreRollout(ctx, { rollout, metadata })
 */
export async function scoreRollout(ctx: ScoreContext, request: ScoreRequest): Promise<ScoreResult> {
  const { env, run } = ctx
  const instanceId = await resolveInstanceId(run.config, request)
  const address = { runId: run.id, instanceId }
  // A reset of the instance (a deploy) breaks the stub in hand; prepare and record are idempotent, so they are made again on a fresh one.
  const fresh = () => env.RUBRIC_INSTANCE.getByName(instanceName(run.id, instanceId))
  const key = await judgementKey(ctx.scorer.signature, run.config.locale, run.config.grade_max, request.rollout, request.metadata, run.config.prompts)

  const prepared = await againAfterReset<Preparation>(() => fresh().prepare(address, request.rollout.id, key))
  if (prepared.kind === 'recorded') return toResult(ctx, instanceId, prepared.entry, { duplicate: true })
  const cached = prepared.kind === 'cached'
  const judgement = cached ? prepared.judgement : await judge(ctx, prepared.snapshot, request)
  const { entry, duplicate } = await againAfterReset(() => fresh().record(address, request.rollout, request.metadata, {
    judgementKey: key,
    rubricVersion: prepared.snapshot.version,
    judgement,
    cached,
  }))
  const result = toResult(ctx, instanceId, entry, { duplicate })
  if (duplicate) return result
  const job: AnalysisJob = { type: 'analysis', runId: run.id, instanceId, rollouts: [{ step: entry.step, rollout_id: entry.rollout_id }] }
  if (run.config.mode === 'sync') {
    await env.ANALYSIS_QUEUE.send(job)
    return settleSync(ctx, request, result, fresh(), address)
  }
  // Async mode: the trainer never waits on the analysis pipeline, not even on the enqueue. A job lost with its
  // isolate before the batch went out is sent again by the step update once the analysis deadline passes.
  pendingAnalyses.add(env.ANALYSIS_QUEUE, job, ctx.defer)
  return result
}

async function settleSync(
  ctx: ScoreContext,
  request: ScoreRequest,
  result: ScoreResult,
  instance: DurableObjectStub<RubricInstance>,
  address: { runId: string; instanceId: string },
): Promise<ScoreResult> {
  const deadline = Date.now() + ctx.run.config.max_wait_s * 1_000
  // A reset of the coordinator drops its waiters: wait again, on a fresh stub, for what is left of the time.
  const updated = await againAfterReset(() => ctx.env.RUN_COORDINATOR.getByName(coordinatorName(ctx.run.id)).waitForStep(result.step, Math.max(0, deadline - Date.now())))
  if (!updated) return { ...result, update_pending: true }
  const snapshot: RubricSnapshot = await instance.snapshot(address)
  if (snapshot.version === result.rubric_version) return result
  const judgement = await judge(ctx, snapshot, request)
  return { ...result, score: judgement.score, criteria: judgement.criteria, rubric_version: snapshot.version, cached: false }
}

async function judge(ctx: ScoreContext, snapshot: RubricSnapshot, request: ScoreRequest): Promise<Judgement> {
  const { settings, model } = ctx.scorer
  let attempts = 1
  try {
    return await judgeRollout(
      model,
      { rubrics: snapshot.rubrics, rollout: request.rollout, metadata: request.metadata, gradeMax: ctx.run.config.grade_max, locale: ctx.run.config.locale, prompts: ctx.run.config.prompts },
      { maxAttempts: settings.max_attempts, maxDelayMs: Math.min(8_000, settings.timeout_ms), onRetry: () => void attempts++ },
    )
  } catch (error) {
    if (!(error instanceof LlmError)) throw error
    // A refused request (bad key, unknown model) will not heal on retry: no Retry-After for it.
    const transient = error.kind !== 'invalid_reply' && error.kind !== 'bad_request'
    throw new AppError('llm_unavailable', `the scoring model failed after ${attempts} attempt${attempts === 1 ? '' : 's'}: ${error.message}`, {
      status: transient ? 503 : 502,
      details: { failure: error.kind, attempts },
      ...(transient ? { retryAfterSeconds: error.retryAfterSeconds ?? 5 } : {}),
    })
  }
}

async function resolveInstanceId(config: RunConfig, request: ScoreRequest): Promise<string> {
  if (config.rubrics_mode === 'global') return 'global'
  return request.instance_id ?? instanceIdForInput(request.rollout.input)
}

function toResult(
  ctx: ScoreContext,
  instanceId: string,
  entry: { rollout_id: string; step: number; rubric_version: number; score: number; criteria: ScoreResult['criteria']; cached: boolean },
  flags: { duplicate: boolean },
): ScoreResult {
  return {
    score: entry.score,
    rubric_version: entry.rubric_version,
    instance_id: instanceId,
    criteria: entry.criteria,
    request_id: ctx.requestId,
    run_id: ctx.run.id,
    rollout_id: entry.rollout_id,
    step: entry.step,
    grade_max: ctx.run.config.grade_max,
    duplicate: flags.duplicate,
    cached: entry.cached,
  }
}
