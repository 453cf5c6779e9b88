import { Hono } from 'hono'
import { z } from 'zod'
import { artifactOrigin, RM_API_VERSION } from '../../src/schemas/artifact.ts'
import { RmScoreRequest } from '../artifacts/score.ts'
import { elapsed, scoreRmBatch, servingArtifact } from '../artifacts/serving.ts'
import type { AppEnv } from '../env.ts'
import { requireRmAccess } from '../middleware/auth.ts'
import { leaveBodyUnread, limitBody } from '../middleware/body-limit.ts'
import { jsonBody } from '../middleware/json-body.ts'
import { rateLimit } from '../middleware/rate-limit.ts'
import { rmJudgeRoutes } from './judge-proxy.ts'

/**
 * Most items one `/rm/<target>/batch_score` request may carry. Smaller than a trainer's batch
 * (`MAX_ROLLOUTS_PER_BATCH`) because an RM item costs more calls: up to `num_votes` (≤ 15) verifier calls, or two
 * (both orders) for a library artifact, so 1,000 items may already mean 15,000 calls over at most 30 chunks.
 */
const MAX_RM_BATCH_ITEMS = 1_000

/**
 * The body of `POST /rm/<target>/batch_score`: items are validated one by one, so a malformed item fails alone.
 * @example
 * const item = { prompt_id: 'p1', prompt: 'Q?', candidate: { candidate_id: 'c1', text: 'A.' } }
 * RmBatchRequest.parse({ items: [item] })
 * @internal
 */
export const RmBatchRequest = z.object({
  items: z
    .array(z.unknown())
    .max(MAX_RM_BATCH_ITEMS, `at most ${MAX_RM_BATCH_ITEMS} items per request: send the rest in another`),
})

/**
 * The autosr RM server per deployment target, so its verl client works unchanged with
 * `RMScoringClient(endpoint="<base>/rm/<target>")`. An isolate reads the target's active deployment at most every
 * `SERVING_DEPLOYMENT_TTL_MS` (2 s), so a deploy or rollback applies within seconds everywhere and at once through the
 * isolate that made it; the parsed artifact, its judge and its model are resolved once per deployment.
 * - `GET /rm/<target>/healthz` → `{status: "ok", artifact_id, source_session_id, schema_version, rm_api_version,
 *   target, deploy_id}`; 404 `target_not_found` before any deployment.
 * - `POST /rm/<target>/score` `{prompt_id, prompt, candidate: {candidate_id, text, source?, metadata?}}` →
 *   `{request_id, artifact_id, prompt_id, candidate_id, score, rubric_id, fallback_rubric, grade_max, criteria,
 *   majority_grades, vote_scores, per_vote_grades, variance, all_na, latency_ms}`; 404 `prompt_not_found` only when
 *   the artifact has no `__default__` rubric; 503/502 `llm_unavailable` when the model fails.
 *   A LIBRARY artifact (`kind: "library"`) needs a reference response (`reference`, or `candidate.metadata.reference`;
 *   else 400 `invalid_request`) and answers `{request_id, artifact_id, artifact_kind: "library", prompt_id,
 *   candidate_id, score, scoring: "pairwise_win_rate_vs_reference", reference_source, orders, failures, consistent,
 *   latency_ms}`: `score` ∈ [0, 1] is the candidate's win rate against the reference judged in both orders (win 1,
 *   tie 0.5, loss 0; failed orders left out and counted; all failed → `llm_unavailable`) — the GRPO scalar of
 *   RewardHarness §4.5; group normalisation is the trainer's. Its request may carry `images`, `candidate.images` and
 *   `reference_images` (workers/artifacts/images.ts), shown to the judge in both orders; a rubric artifact answers a
 *   request with images 400 `invalid_request` (it grades text only).
 * - `POST /rm/<target>/batch_score` `{items: […]}` → `{request_id, artifact_id, results, latency_ms}`, where each
 *   result is `{index, ok: true, …score fields, latency_ms}` or `{index, ok: false, prompt_id, candidate_id,
 *   error_code, error_message, latency_ms}`: one failing item never fails the batch; more than a few items are scored
 *   in chunks handed to other invocations of this Worker (`scoreRmBatch`).
 * Access: open under `DEPLOYMENT=local`; otherwise the admin token or the `RM_TOKEN` secret.
 * @example app.route('/rm/:target', rmRoutes)
 */
export const rmRoutes = new Hono<AppEnv>()
  .use('*', requireRmAccess())
  // Whatever the method: a probe's body is never read.
  .use('/healthz', leaveBodyUnread())
  .get('/healthz', async (c) => {
    const { deployment, artifact, judge } = await servingArtifact(c.env, c.req.param('target'))
    return c.json({
      status: 'ok',
      artifact_id: artifact.artifact_id,
      artifact_kind: artifact.kind,
      source_session_id: artifactOrigin(artifact).source_session_id,
      schema_version: artifact.schema_version,
      rm_api_version: RM_API_VERSION,
      target: deployment.target,
      deploy_id: deployment.deploy_id,
      judge,
    })
  })
  .post('/score', rateLimit(), limitBody('other'), jsonBody(RmScoreRequest), async (c) => {
    const started = Date.now()
    const { scorer, judge } = await servingArtifact(c.env, c.req.param('target'))
    const score = await scorer().score(c.get('body'))
    return c.json({
      request_id: c.get('requestId'),
      ...score,
      judge,
      latency_ms: elapsed(started),
    })
  })
  .post('/batch_score', rateLimit(), limitBody('batch'), jsonBody(RmBatchRequest), async (c) => {
    const started = Date.now()
    const serving = await servingArtifact(c.env, c.req.param('target'))
    const requestId = c.get('requestId')
    const items = c.get('body').items.map((raw, index) => ({ index, raw }))
    const results = await scoreRmBatch(c.env, { deployment: serving.deployment, requestId, items }, serving.scorer)
    return c.json({
      request_id: requestId,
      artifact_id: serving.artifact.artifact_id,
      judge: serving.judge,
      results,
      latency_ms: elapsed(started),
    })
  })
  .route('/v1', rmJudgeRoutes)
