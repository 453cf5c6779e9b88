import { Hono } from 'hono'
import { withoutCredentials } from '../../src/credentials/index.ts'
import { z } from 'zod'
import { AppError } from '../../src/errors/index.ts'
import { optionalJsonBody } from '../artifacts/body.ts'
import { deployArtifact, DeployRequest, parseTarget, rollbackTarget, RollbackRequest } from '../artifacts/deploy.ts'
import { listDeployments, loadArtifact, publicRecord, storeArtifact } from '../artifacts/store.ts'
import { parseArtifactUpload } from '../artifacts/validate.ts'
import type { AppEnv } from '../env.ts'
import { notFound } from './not-found.ts'
import { requireAdmin } from '../middleware/auth.ts'
import { limitBody } from '../middleware/body-limit.ts'
import { jsonBody } from '../middleware/json-body.ts'
import { rateLimit } from '../middleware/rate-limit.ts'
import { heldSecrets } from '../scoring/secrets.ts'
import { integerParam, validQuery } from '../middleware/query.ts'

/** Deploy records `GET …/deployments` returns unless `?limit=` says otherwise (at most 1000). */
const DEFAULT_HISTORY = 100
/** The query of a target's deployment history. */
const HistoryQuery = z.object({ limit: integerParam({ min: 1, max: 1_000 }).default(DEFAULT_HISTORY) })

/**
 * The admin API of RM artifacts (admin token only; a run token gets 403):
 * - `POST /admin/artifacts` (body: an RmArtifact) → 201 `{artifact_id, stored: true}`, 200 `{…, stored: false}` when
 *   already stored, 400 `invalid_artifact` whose `details` are `[{path, message}]`.
 * - `GET /admin/artifacts/:artifactId` → the stored artifact (as uploaded, after schema defaults; never a credential).
 * - `POST /admin/targets/:target/deployments` `{artifact_id, deployed_by?, llm?: {base_url, model?, api_key_env?}}`
 *   → 201 DeployRecord; 404 `artifact_not_found`; 400 `llm_not_configured`.
 * - `POST /admin/targets/:target/rollback` `{deployed_by?}` → 201 DeployRecord (`action: "rollback"`);
 *   409 `nothing_to_roll_back`.
 * - `GET /admin/targets/:target/deployments[?limit=N]` → `{target, active_artifact_id, deployments}` newest first.
 * @example app.route('/', artifactAdminRoutes) // before the run API, whose run resolution matches every path
 */
export const artifactAdminRoutes = new Hono<AppEnv>()
  .use('/admin/*', rateLimit(), requireAdmin())
  .post('/admin/artifacts', limitBody('other'), jsonBody(z.unknown()), async (c) => {
    const artifact = await parseArtifactUpload(c.get('body'), heldSecrets(c.env))
    const { stored } = await storeArtifact(c.env.DB, artifact)
    return c.json({ artifact_id: artifact.artifact_id, stored }, stored ? 201 : 200)
  })
  .get('/admin/artifacts/:artifactId', async (c) => {
    const id = c.req.param('artifactId')
    const artifact = /^rm_[0-9a-f]{64}$/.test(id) ? await loadArtifact(c.env.DB, id) : undefined
    if (!artifact) throw new AppError('artifact_not_found', `no artifact "${id}" is stored here`)
    // An artifact stored before uploads were checked for credentials may hold one: it is never served.
    return c.json(withoutCredentials(artifact, '', heldSecrets(c.env)).value as typeof artifact)
  })
  .post('/admin/targets/:target/deployments', limitBody('other'), jsonBody(DeployRequest), async (c) => {
    const target = parseTarget(c.req.param('target'))
    return c.json(await deployArtifact(c.env, target, c.get('body')), 201)
  })
  .post('/admin/targets/:target/rollback', limitBody('other'), optionalJsonBody(RollbackRequest), async (c) => {
    const target = parseTarget(c.req.param('target'))
    return c.json(await rollbackTarget(c.env, target, c.get('body')), 201)
  })
  .get('/admin/targets/:target/deployments', validQuery(HistoryQuery), async (c) => {
    const target = parseTarget(c.req.param('target'))
    const { limit } = c.req.valid('query')
    const history = await listDeployments(c.env.DB, target, limit)
    // The newest record is the active deployment (see workers/artifacts/store.ts).
    return c.json({
      target,
      active_artifact_id: history[0]?.artifact_id ?? null,
      deployments: history.map(publicRecord),
    })
  })
  .all('/admin/*', notFound)
