/**
 * Serving a target's deployed artifact: its deployment, artifact, judge and scorer resolved once per deployment an
 * isolate serves, and a `batch_score`'s items scored here or in chunks handed to other invocations. The
 * `/rm/<target>` routes and the `JUDGE.scoreRm` entrypoint both use it, so neither imports the other.
 */
import { AppError } from '../../src/errors/index.ts'
import type { ChatModel } from '../../src/llm/index.ts'
import type { AnyRmArtifact } from '../../src/schemas/artifact.ts'
import type { Env } from '../env.ts'
import { handOut } from '../scoring/fan-out.ts'
import { judgeService, type RmChunk } from '../scoring/judge-service.ts'
import { parseTarget } from './deploy.ts'
import { LibraryArtifactScorer } from './library.ts'
import { servingJudge, verifierModel, type ServingJudge } from './llm.ts'
import { ArtifactScorer, RmScoreRequest } from './score.ts'
import { loadArtifact, servingDeployment, type StoredDeployment } from './store.ts'

/**
 * Scores a `batch_score`'s items in order, each failing alone: in this invocation when they are few, else in chunks
 * handed to other invocations of this Worker (`JUDGE.scoreRm`), each with its own 6 connections, as `/score/batch`
 * does; a chunk whose invocation fails is scored here.
 * @example const results = await scoreRmBatch(env, { deployment, requestId, items }, serving.scorer)
 */
export async function scoreRmBatch(env: Env, chunk: RmChunk, newScorer: () => RmScorer): Promise<object[]> {
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
 * @example const { artifact, scorer } = await servingArtifact(c.env, c.req.param('target'))
 */
export async function servingArtifact(env: Env, rawTarget: string | undefined): Promise<Serving> {
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

/**
 * Milliseconds since `started`, for an answer's `latency_ms`.
 * @example latency_ms: elapsed(started)
 */
export function elapsed(started: number): number {
  return Date.now() - started
}
