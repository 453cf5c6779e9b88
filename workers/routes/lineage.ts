import { drizzle } from 'drizzle-orm/d1'
import { Hono } from 'hono'
import { z } from 'zod'
import { refuseLiteralCredentials } from '../../src/credentials/literal.ts'
import { AppError } from '../../src/errors/index.ts'
import { EvalReport, LineageId, TrainingRunManifest, TrainingRunResult } from '../../src/lineage/schemas.ts'
import {
  harnessRunsOf,
  LineageError,
  listRuns,
  loadChain,
  recordEval,
  recordManifest,
  recordResult,
} from '../../src/lineage/store.ts'
import type { AppEnv, Env, Principal } from '../env.ts'
import { notFound } from './not-found.ts'
import type { StepTimelineEntry } from '../../durable-objects/run-coordinator/index.ts'
import { requireAdmin } from '../middleware/auth.ts'
import { limitBody } from '../middleware/body-limit.ts'
import { jsonBody } from '../middleware/json-body.ts'
import { rateLimit } from '../middleware/rate-limit.ts'
import { heldSecrets } from '../scoring/secrets.ts'
import { integerParam, validQuery } from '../middleware/query.ts'
import { objects } from '../objects/call.ts'

const NEEDS_TOKEN = '/lineage needs a bearer token: the admin token or a run token'

/** The query of `GET /lineage/runs`. */
const RunListQuery = z.object({
  status: z.enum(['succeeded', 'failed', 'canceled'], { error: 'must be succeeded, failed or canceled' }).optional(),
  limit: integerParam({ min: 1, max: 1_000 }).default(100),
  artifact_id: z.string().optional(),
  dataset_version: z.string().optional(),
})

/** Admin passes; a run token only for training runs whose manifest names its run (`harness_run_id`); nobody else. */
async function requireRunAccess(db: D1Database, principal: Principal, runId: string): Promise<void> {
  if (principal.kind === 'admin') return
  // Refused before the body by lineageNeedsToken already; said again for the type.
  if (principal.kind === 'anonymous') throw new AppError('unauthorized', NEEDS_TOKEN)
  const owner = (await harnessRunsOf(drizzle(db), [runId])).get(runId)
  if (owner === undefined) throw new AppError('not_found', `no training run "${runId}" is recorded`)
  if (owner !== principal.runId)
    throw new AppError('forbidden', `training run "${runId}" does not belong to run "${principal.runId}"`)
}

/**
 * Refuses a training-run id a run token may not take: only its run's id, or that id, a `.` and more. Harness run ids
 * have no `.`, so `<run id>.…` belongs to one run alone, and every other id stays free for the admin, whom a run token
 * could otherwise beat to it (the admin would then get 409 `run_exists`).
 * @example checkRunTokenLineageId('grpo-7.seed-1', 'grpo-7') // passes; ('prod-final', 'grpo-7') throws 403
 */
function checkRunTokenLineageId(trainingRunId: string, harnessRunId: string): void {
  if (trainingRunId === harnessRunId || trainingRunId.startsWith(`${harnessRunId}.`)) return
  throw new AppError(
    'forbidden',
    `run_id "${trainingRunId}": a run token records training runs only under its own run's id: use ` +
      `"${harnessRunId}" or "${harnessRunId}.<name>", or record it with the admin token`,
  )
}

function asAppError(error: unknown): never {
  if (error instanceof LineageError) {
    throw error.kind === 'conflict'
      ? new AppError('run_exists', error.message)
      : new AppError('not_found', error.message)
  }
  throw error
}

/**
 * The lineage API (admin token, or the token of the harness run a training run names as `harness_run_id`):
 * - `POST /lineage/manifests` (TrainingRunManifest) → 201 `{run_id, stored: true}`, 200 `{…, stored: false}` when
 *   identical; 409 `run_exists` for a different manifest. A run token's manifest belongs to its run (harness_run_id
 *   defaults to it; another value is 403), and its `run_id` is the run's id or starts with it and a `.` (else 403).
 * - `POST /lineage/results` (TrainingRunResult), `POST /lineage/evals` (EvalReport): same answers; 404 without the
 * manifest.
 * - `GET /lineage/runs/:id` → the chain (LineageChain), the deployment joined from rm_deployments when recorded.
 * - `GET /lineage/runs?artifact_id=&dataset_version=&status=&limit=` (admin) → `{runs}` newest first by start time.
 * Bad input → 400 `invalid_request` whose details name each field.
 * @example app.route('/', lineageRoutes) // before the run API
 */
export const lineageRoutes = new Hono<AppEnv>()
  // Before any body is read: a caller without a token is refused unread.
  .use('/lineage/*', rateLimit(), async function lineageNeedsToken(c, next) {
    if (c.get('principal').kind === 'anonymous') throw new AppError('unauthorized', NEEDS_TOKEN)
    await next()
  })
  .post('/lineage/manifests', limitBody('other'), jsonBody(TrainingRunManifest), async (c) => {
    const principal = c.get('principal')
    let manifest = c.get('body')
    refuseLiteralCredentials(manifest, '', heldSecrets(c.env))
    if (principal.kind === 'run') {
      if (manifest.harness_run_id !== undefined && manifest.harness_run_id !== principal.runId) {
        throw new AppError(
          'forbidden',
          `harness_run_id "${manifest.harness_run_id}" is not this token's run "${principal.runId}"`,
        )
      }
      checkRunTokenLineageId(manifest.run_id, principal.runId)
      manifest = { ...manifest, harness_run_id: principal.runId }
    }
    const outcome = await recordManifest(drizzle(c.env.DB), manifest).catch(asAppError)
    return c.json(outcome, outcome.stored ? 201 : 200)
  })
  .post('/lineage/results', limitBody('other'), jsonBody(TrainingRunResult), async (c) => {
    const result = c.get('body')
    refuseLiteralCredentials(result, '', heldSecrets(c.env))
    await requireRunAccess(c.env.DB, c.get('principal'), result.run_id)
    const outcome = await recordResult(drizzle(c.env.DB), result).catch(asAppError)
    return c.json(outcome, outcome.stored ? 201 : 200)
  })
  .post('/lineage/evals', limitBody('other'), jsonBody(EvalReport), async (c) => {
    const report = c.get('body')
    refuseLiteralCredentials(report, '', heldSecrets(c.env))
    await requireRunAccess(c.env.DB, c.get('principal'), report.run_id)
    const outcome = await recordEval(drizzle(c.env.DB), report).catch(asAppError)
    return c.json(outcome, outcome.stored ? 201 : 200)
  })
  .get('/lineage/runs/:id', async (c) => {
    const runId = c.req.param('id')
    if (!LineageId.safeParse(runId).success)
      throw new AppError('invalid_request', `id: "${runId}" is not a valid training run id`)
    await requireRunAccess(c.env.DB, c.get('principal'), runId)
    const chain = await loadChain(drizzle(c.env.DB), runId)
    if (!chain) throw new AppError('not_found', `no training run "${runId}" is recorded`)
    const harness = chain.manifest.harness_run_id
    return c.json(harness ? { ...chain, judge_audit: await judgeAudit(c.env, harness) } : chain)
  })
  .get('/lineage/runs', requireAdmin(), validQuery(RunListQuery), async (c) => {
    const { status, limit, artifact_id: artifactId, dataset_version: datasetVersion } = c.req.valid('query')
    const runs = await listRuns(drizzle(c.env.DB), {
      limit,
      ...(artifactId === undefined ? {} : { artifact_id: artifactId }),
      ...(datasetVersion === undefined ? {} : { dataset_version: datasetVersion }),
      ...(status === undefined ? {} : { status }),
    })
    return c.json({ runs })
  })
  .all('/lineage/*', notFound)

/**
 * The audits of the harness run's steps (run config `audit`): per step and instance, how far a second model's scores
 * were from the judge's. Empty when the run audits nothing.
 */
async function judgeAudit(env: Env, harnessRunId: string) {
  const timeline: StepTimelineEntry[] = await objects.coordinator(env, harnessRunId, (coordinator) =>
    coordinator.timeline(),
  )
  return timeline.flatMap(({ step, instances }) =>
    instances.flatMap(({ instance_id, update }) => (update?.audit ? [{ step, instance_id, ...update.audit }] : [])),
  )
}
