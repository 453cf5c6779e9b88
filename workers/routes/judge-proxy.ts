import { Hono } from 'hono'
import { LRUCache } from 'lru-cache'
import { AppError, contextLengthExceeded } from '../../src/errors/index.ts'
import { canonicalJson, sha256Hex } from '../../src/hash/index.ts'
import { ChatCompletionRequest, chatCompletion, judgeRequest, modelList } from '../../src/judge-proxy/index.ts'
import { LlmError, withRetry, type ChatModel } from '../../src/llm/index.ts'
import type { ChatRequest, ChatResponse } from '../../src/llm/types.ts'
import { verifierModel } from '../artifacts/llm.ts'
import { servingArtifact } from '../artifacts/serving.ts'
import type { AppEnv } from '../env.ts'
import { limitBody } from '../middleware/body-limit.ts'
import { jsonBody } from '../middleware/json-body.ts'
import { rateLimit } from '../middleware/rate-limit.ts'
import { requestModels } from '../scoring/models.ts'
import { recordTelemetry } from '../telemetry/index.ts'

/**
 * Judge replies by (model signature, request): a rubric framework asks the same judge prompt again for every rubric
 * function that reads it (verifiers caches per prompt in its state, across a process only). Resolved replies only.
 */
const replies = new LRUCache<string, ChatResponse>({ max: 4_096 })

/** One judge call, through the cache, in at most `maxAttempts` attempts; a failure as the HTTP error it is. */
async function judgeOnce(
  model: ChatModel,
  signature: string,
  request: ChatRequest,
  maxAttempts: number,
): Promise<{ response: ChatResponse; cached: boolean }> {
  const key = await sha256Hex(canonicalJson({ signature, ...request, mock: undefined, signal: undefined }))
  const known = replies.get(key)
  if (known) return { response: known, cached: true }
  let attempts = 0
  try {
    const response = await withRetry(
      () => {
        attempts++
        return model.complete(request)
      },
      { maxAttempts, maxDelayMs: 8_000 },
    )
    replies.set(key, response)
    return { response, cached: false }
  } catch (error) {
    if (!(error instanceof LlmError)) throw error
    if (error.kind === 'context_length') throw contextLengthExceeded('judge', error.message, error.details.contextLimit)
    throw new AppError('llm_unavailable', `the judge failed after ${attempts} attempt(s): ${error.message}`, {
      status: error.transient ? 503 : 502,
      details: { failure: error.kind, attempts },
      ...(error.transient ? { retryAfterSeconds: error.retryAfterSeconds ?? 5 } : {}),
    })
  }
}

/**
 * The run's judge as an OpenAI-compatible endpoint, for rubric frameworks that bring their own judge loop (verifiers'
 * `JudgeRubric`, ART's RULER): `base_url=<worker>/runs/<run>/v1`, `api_key=<run token>`. A call goes to the run's
 * scorer model under the run's caps (`max_concurrent_llm_calls`, the role's concurrency), its rate limit, the
 * operator's `LLM_HOST_ALLOWLIST` and `budgets.judge_calls_per_rollout` (attempts per request), is cached by content,
 * and counts in `/llm_calls` (role `scorer`).
 * - `GET /v1/models` → `{object: "list", data: [{id: <the judge's model>}]}` (any model name is accepted in a call)
 * - `POST /v1/chat/completions` → an OpenAI `chat.completion` (`x-reward-harness-cached: 1` when served from cache)
 * @example runApi.route('/v1', runJudgeRoutes)
 */
export const runJudgeRoutes = new Hono<AppEnv>()
  .get('/models', (c) => {
    const run = c.get('run')
    return c.json(modelList(requestModels(c.env, run.config).forRole('scorer').settings.model))
  })
  .post('/chat/completions', limitBody('rollout'), jsonBody(ChatCompletionRequest), async (c) => {
    const run = c.get('run')
    const requestId = c.get('requestId')
    const models = requestModels(c.env, run.config)
    const scorer = models.forRole('scorer')
    try {
      const maxAttempts = Math.min(scorer.settings.max_attempts, run.config.budgets.judge_calls_per_rollout)
      const judged = await judgeOnce(scorer.model, scorer.signature, judgeRequest(c.get('body')), maxAttempts)
      if (judged.cached) c.header('x-reward-harness-cached', '1')
      return c.json(chatCompletion(judged.response, requestId, scorer.settings.model))
    } finally {
      recordTelemetry(c.env, { runId: run.id, requestId, calls: models.calls }, c.executionCtx)
    }
  })

/**
 * The judge of a deploy target's active artifact as an OpenAI-compatible endpoint: `base_url=<worker>/rm/<target>/v1`
 * with the RM token (or the admin token) as the key; rate limited like `/rm/<target>/score`, cached by content.
 * @example rmRoutes.route('/v1', rmJudgeRoutes)
 */
export const rmJudgeRoutes = new Hono<AppEnv>()
  .get('/models', async (c) => {
    const { judge } = await servingArtifact(c.env, c.req.param('target'))
    return c.json(modelList('model' in judge ? judge.model : judge.backend))
  })
  .post('/chat/completions', rateLimit(), limitBody('rollout'), jsonBody(ChatCompletionRequest), async (c) => {
    const { artifact, deployment, judge } = await servingArtifact(c.env, c.req.param('target'))
    const model = verifierModel(c.env, artifact, deployment.llm)
    const judged = await judgeOnce(model, `rm:${deployment.deploy_id}:${model.id}`, judgeRequest(c.get('body')), 4)
    if (judged.cached) c.header('x-reward-harness-cached', '1')
    return c.json(chatCompletion(judged.response, c.get('requestId'), 'model' in judge ? judge.model : model.id))
  })
