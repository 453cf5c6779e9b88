/**
 * Deploy and rollback of RM artifacts to named targets. Both append one deploy record whose `previous_artifact_id`
 * is the artifact active before it; the record's artifact becomes the target's active one. Everything is checked
 * before that single write, so on any error the active artifact stays what it was.
 *
 * - Deploy: `previous_artifact_id` = the active artifact, or null on a fresh target. Re-deploying the active artifact
 *   (say, to point it at another endpoint) keeps the active deployment's `previous_artifact_id`, so it never names
 *   itself and a rollback still has somewhere to go.
 * - Rollback: re-activates the previous *deployment*, artifact and judge together: the newest earlier record that
 *   served something else, so a redeploy of the same artifact with a bad judge can be rolled back. Its record's
 *   `previous_artifact_id` is the artifact rolled back from, and a second rollback undoes the first.
 */
import { z } from 'zod'
import { artifactOrigin, TargetName, type AnyRmArtifact, type DeployRecord } from '../../src/schemas/artifact.ts'
import { refuseLiteralCredentials } from '../../src/credentials/literal.ts'
import { AppError } from '../../src/errors/index.ts'
import { strict } from '../../src/schemas/strict.ts'
import type { Env } from '../env.ts'
import { randomHex } from '../runs/store.ts'
import { heldSecrets } from '../scoring/secrets.ts'
import { DeploymentLlm, resolveEndpoint } from './llm.ts'
import { activeDeployment, appendDeployment, loadArtifact, previousDeployment, type StoredDeployment } from './store.ts'

/** Reads of the active deployment before giving up on a target that other deploys keep changing. */
const DEPLOY_ATTEMPTS = 5

/**
 * The body of `POST /admin/targets/<target>/deployments`.
 * @example DeployRequest.parse({ artifact_id: 'rm_3fa1', deployed_by: 'al', llm: { base_url: 'http://gpu:8000/v1' } })
 */
export const DeployRequest = z
  .object({
    artifact_id: z.string().min(1).max(200),
    deployed_by: z.string().min(1).max(200).optional(),
    llm: DeploymentLlm.optional(),
  })
  .apply(strict)
export type DeployRequest = z.infer<typeof DeployRequest>

/**
 * The body of `POST /admin/targets/<target>/rollback` (it may be empty).
 * @example RollbackRequest.parse({ deployed_by: 'alice' })
 */
export const RollbackRequest = z.object({ deployed_by: z.string().min(1).max(200).optional() })
export type RollbackRequest = z.infer<typeof RollbackRequest>

/**
 * A target name from a path segment, or a 400 naming the rule.
 * @example parseTarget('prod') // 'prod'
 */
export function parseTarget(raw: string | undefined): string {
  const parsed = TargetName.safeParse(raw ?? '')
  if (!parsed.success)
    throw new AppError(
      'invalid_request',
      `target "${raw ?? ''}" is not valid: ${parsed.error.issues[0]?.message ?? 'bad target name'}`,
    )
  return parsed.data
}

/**
 * Makes `request.artifact_id` the target's active artifact and returns the deploy record.
 * @example const record = await deployArtifact(env, 'prod', { artifact_id: 'rm_3fa1…' })
 */
export async function deployArtifact(env: Env, target: string, request: DeployRequest): Promise<DeployRecord> {
  refuseLiteralCredentials(request.llm, 'llm', heldSecrets(env))
  const artifact = await loadArtifact(env.DB, request.artifact_id)
  if (!artifact)
    throw new AppError(
      'artifact_not_found',
      `no artifact "${request.artifact_id}" is stored here; upload it with POST /admin/artifacts first`,
    )
  const llm = request.llm ?? null
  resolveEndpoint(env, artifact, llm)
  return appendWithRetry(env.DB, target, llm, (active) => ({
    ...recordBase(target, artifact, request.deployed_by),
    action: 'deploy',
    previous_artifact_id:
      active === undefined
        ? null
        : active.artifact_id === artifact.artifact_id
          ? active.previous_artifact_id
          : active.artifact_id,
  }))
}

/**
 * Re-activates the deployment (artifact and judge) before the target's active one; 409 `nothing_to_roll_back` when
 * there is none.
 * @example const record = await rollbackTarget(env, 'prod', { deployed_by: 'alice' }) // record.action === 'rollback'
 */
export async function rollbackTarget(env: Env, target: string, request: RollbackRequest): Promise<DeployRecord> {
  for (let attempt = 1; attempt <= DEPLOY_ATTEMPTS; attempt++) {
    const active = await activeDeployment(env.DB, target)
    if (!active) throw new AppError('nothing_to_roll_back', `target "${target}" has never been deployed`)
    const previous = await previousDeployment(env.DB, active)
    if (!previous)
      throw new AppError(
        'nothing_to_roll_back',
        `target "${target}" has served only its active deployment (${active.artifact_id} with this judge): ` +
          'there is no earlier one to go back to',
      )
    const artifact = await loadArtifact(env.DB, previous.artifact_id)
    if (!artifact)
      throw new AppError('artifact_not_found', `the previous artifact "${previous.artifact_id}" is no longer stored`)
    resolveEndpoint(env, artifact, previous.llm)
    const record: DeployRecord = {
      ...recordBase(target, artifact, request.deployed_by),
      action: 'rollback',
      previous_artifact_id: active.artifact_id,
    }
    if (await appendDeployment(env.DB, record, previous.llm, active.seq)) return record
  }
  throw conflict(target)
}

async function appendWithRetry(
  db: D1Database,
  target: string,
  llm: DeploymentLlm | null,
  build: (active: StoredDeployment | undefined) => DeployRecord,
): Promise<DeployRecord> {
  for (let attempt = 1; attempt <= DEPLOY_ATTEMPTS; attempt++) {
    const active = await activeDeployment(db, target)
    const record = build(active)
    if (await appendDeployment(db, record, llm, active?.seq ?? 0)) return record
  }
  throw conflict(target)
}

function recordBase(
  target: string,
  artifact: AnyRmArtifact,
  deployedBy: string | undefined,
): Omit<DeployRecord, 'action' | 'previous_artifact_id'> {
  const now = new Date()
  return {
    deploy_id: `deploy_${now.toISOString().replace(/[-:.]/g, '')}_${randomHex(4)}`,
    target,
    artifact_id: artifact.artifact_id,
    deployed_by: deployedBy ?? 'unknown',
    deployed_at: now.toISOString(),
    dataset_sha256: artifactOrigin(artifact).dataset_sha256,
    config_hash: artifactOrigin(artifact).config_hash,
  }
}

function conflict(target: string): AppError {
  return new AppError(
    'deployment_conflict',
    `other deployments of "${target}" kept landing first; nothing was changed, try again`,
  )
}
