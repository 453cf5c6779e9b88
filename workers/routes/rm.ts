import { Hono } from 'hono'
import { z } from 'zod'
import { AppError } from '../../src/errors/index.ts'
import { artifactOrigin, RM_API_VERSION, type AnyRmArtifact } from '../../src/schemas/artifact.ts'
import { parseTarget } from '../artifacts/deploy.ts'
import { servingJudge, verifierModel, type ServingJudge } from '../artifacts/llm.ts'
import type { ChatModel } from '../../src/llm/index.ts'
import { LibraryArtifactScorer } from '../artifacts/library.ts'
import { ArtifactScorer, RmScoreRequest } from '../artifacts/score.ts'
import { loadArtifact, servingDeployment, type StoredDeployment } from '../artifacts/store.ts'
import type { AppEnv, Env } from '../env.ts'
import { requireRmAccess } from '../middleware/auth.ts'
import { handOut } from '../scoring/fan-out.ts'
import { judgeService, type RmChunk } from '../scoring/judge-service.ts'
import { jsonBody } from '../middleware/json-body.ts'

/** Most items one `batch_score` request may carry. */
const MAX_BATCH_ITEMS = 1_000

/**
 * The body of `POST /rm/<target>/batch_score`: items are validated one by one, so a malformed item fails alone.
 * @example
 * const item = { prompt_id: 'p1', prompt: 'Q?', candidate: { candidate_id: 'c1', text: 'A.' } }
 * RmBatchRequest.parse({ items: [item] })
 */
export const RmBatchRequest = z.object({ items: z.array(z.unknown()).max(MAX_BATCH_ITEMS) })

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
  .post('/score', jsonBody(RmScoreRequest), async (c) => {
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
  .post('/batch_score', jsonBody(RmBatchRequest), async (c) => {
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

/**
 * Scores a `batch_score`'s items in order, each failing alone: in this invocation when they are few, else in chunks
 * handed to other invocations of this Worker (`JUDGE.scoreRm`), each with its own 6 connections, as `/score/batch`
 * does; a chunk whose invocation fails is scored here.
 * @example const results = await scoreRmBatch(env, { deployment, requestId, items }, serving.scorer)
 */
async function scoreRmBatch(env: Env, chunk: RmChunk, newScorer: () => RmScorer): Promise<object[]> {
  const here = (part: readonly RmChunk['items'][number][]) => {
    const scorer = newScorer()
    return Promise.all(part.map(({ index, raw }) => scoreRmItem(scorer, index, raw, chunk.requestId)))
  }
  const judge = judgeService(env)
  return handOut(
    chunk.items,
    here,
    judge && (async (part) => (await judge.scoreRm({ ...chunk, items: part })) as object[]),
    chunk.requestId,
  )
}

/**
 * Scores a chunk handed out by `scoreRmBatch` with the deployment's artifact (by id, so a deploy meanwhile changes
 * nothing): the `JUDGE.scoreRm` entrypoint.
 * @example const results = await scoreRmChunk(env, chunk)
 */
export async function scoreRmChunk(env: Env, chunk: RmChunk): Promise<object[]> {
  const artifact = await loadArtifact(env.DB, chunk.deployment.artifact_id)
  if (!artifact) throw new Error(`the artifact ${chunk.deployment.artifact_id} is not stored`)
  const scorer = scorerFactory(env, artifact, chunk.deployment)()
  return Promise.all(chunk.items.map(({ index, raw }) => scoreRmItem(scorer, index, raw, chunk.requestId)))
}

async function scoreRmItem(scorer: RmScorer, index: number, raw: unknown, requestId: string): Promise<object> {
  const itemStarted = Date.now()
  const ids = idsOf(raw)
  const parsed = RmScoreRequest.safeParse(raw)
  if (!parsed.success) {
    const problems = parsed.error.issues
      .slice(0, 3)
      .map((issue) => `${issue.path.join('.') || '(item)'}: ${issue.message}`)
      .join('; ')
    return {
      index,
      ok: false,
      ...ids,
      error_code: 'invalid_request',
      error_message: `the item does not match the expected shape — ${problems}`,
      latency_ms: elapsed(itemStarted),
    }
  }
  try {
    return { index, ok: true, ...(await scorer.score(parsed.data)), latency_ms: elapsed(itemStarted) }
  } catch (error) {
    const { code, message } = itemError(error, requestId)
    return { index, ok: false, ...ids, error_code: code, error_message: message, latency_ms: elapsed(itemStarted) }
  }
}

/** What serving a deployment needs, resolved once per deployment an isolate serves. */
interface Serving {
  deployment: StoredDeployment
  artifact: AnyRmArtifact
  judge: ServingJudge | { backend: 'unavailable' }
  /** A scorer for one request, or the reason there is none (an endpoint that vanished since the deploy). */
  scorer(): RmScorer
}

type RmScorer = { score(request: RmScoreRequest): Promise<object & { score: number }> }

/** Resolved servings by deployment (never a resolution in flight: a request must not await another's I/O). */
const servings = new WeakMap<StoredDeployment, Serving>()

/**
 * The target's active deployment (cached per isolate for seconds: `servingDeployment`) with its artifact, judge and
 * model resolved once; 404 `target_not_found` when nothing was ever deployed there.
 */
async function servingArtifact(env: Env, rawTarget: string | undefined): Promise<Serving> {
  const target = parseTarget(rawTarget)
  const deployment = await servingDeployment(env.DB, target)
  if (!deployment) {
    throw new AppError(
      'target_not_found',
      `no target "${target}": nothing was ever deployed there. Deploy an artifact to it with ` +
        `\`reward-harness deploy --artifact <file> --target ${target} --url <this edge>\` ` +
        `(or POST /admin/targets/${target}/deployments)`,
    )
  }
  const known = servings.get(deployment)
  if (known) return known
  const artifact = await loadArtifact(env.DB, deployment.artifact_id)
  if (!artifact) throw new Error(`the active artifact ${deployment.artifact_id} of "${target}" is not stored`)
  const judge = judgeOf(env, artifact, deployment)
  const resolved = { deployment, artifact, judge, scorer: scorerFactory(env, artifact, deployment) }
  servings.set(deployment, resolved)
  return resolved
}

/**
 * Makes a scorer per request — rubric artifacts grade with their rubric, library artifacts judge the candidate
 * against the request's reference in both orders (workers/artifacts/library.ts); an endpoint that vanished since the
 * deploy (a var removed) is a 503 on every request, not a 400.
 */
function scorerFactory(env: Env, artifact: AnyRmArtifact, deployment: StoredDeployment): () => RmScorer {
  let model: ChatModel
  try {
    model = verifierModel(env, artifact, deployment.llm)
  } catch (error) {
    const unavailable =
      error instanceof AppError && error.code === 'llm_not_configured'
        ? new AppError('llm_unavailable', error.message)
        : error
    return () => {
      throw unavailable
    }
  }
  return artifact.kind === 'library'
    ? () => new LibraryArtifactScorer(artifact, model)
    : () => new ArtifactScorer(artifact, model)
}

/** The deployment's judge for an answer; an endpoint that vanished since the deploy is named as unavailable. */
function judgeOf(env: Env, artifact: AnyRmArtifact, deployment: StoredDeployment) {
  try {
    return servingJudge(env, artifact, deployment.llm)
  } catch {
    return { backend: 'unavailable' as const }
  }
}

function itemError(error: unknown, requestId: string): { code: string; message: string } {
  if (error instanceof AppError) return { code: error.code, message: error.message }
  console.error(`[${requestId}] batch_score item failed`, error)
  return { code: 'internal', message: 'internal error; the request id identifies it in the logs' }
}

function idsOf(raw: unknown): { prompt_id: string | null; candidate_id: string | null } {
  const item = typeof raw === 'object' && raw !== null ? (raw as Record<string, unknown>) : {}
  const candidate =
    typeof item.candidate === 'object' && item.candidate !== null ? (item.candidate as Record<string, unknown>) : {}
  return {
    prompt_id: typeof item.prompt_id === 'string' ? item.prompt_id : null,
    candidate_id: typeof candidate.candidate_id === 'string' ? candidate.candidate_id : null,
  }
}

const elapsed = (started: number) => Date.now() - started
