/**
 * `train prepare`: check the target serves what the training run expects, optionally create its online run, record
 * its manifest in lineage and write the env file the trainer runs with. Every check that can refuse comes before the
 * first thing written, so a refused prepare leaves no env file, no online run and no lineage record.
 */
import { accessSync, constants } from 'node:fs'
import path from 'node:path'
import { LINEAGE_SCHEMA_VERSION, LineageId, TrainingRunManifest } from '../../src/lineage/schemas.ts'
import type { DeployRecord } from '../../src/schemas/artifact.ts'
import type { AdminClient, AdminClientOptions, RmHealth } from '../deploy/client.ts'
import { EdgeHttpError } from '../deploy/errors.ts'
import { checkTarget, checkUrl, connect } from '../deploy/run.ts'
import { requireAdminToken } from '../edge/index.ts'
import { withBackend } from '../lineage/backend.ts'
import { ENV, stageEnvFile } from './env-file.ts'
import { HandshakeRefusedError } from './errors.ts'
import { createOnlineRun, readOnlineRunRequest } from './online-run.ts'
import { clearState } from './state.ts'
import { describeStore, resolveStore, type TrainStoreFlags } from './store.ts'
import { UsageError } from '../../src/usage-error/index.ts'

/** What a manifest says when the flag is not given: honest about not knowing, and easy to find later. */
const UNSPECIFIED = 'unspecified'

/** The flags of `train prepare`. */
export interface PrepareOptions extends TrainStoreFlags {
  /** The edge's base URL. */
  url: string
  target: string
  /** The training run's id in lineage (and the online run's id unless its config file names one). */
  name: string
  envFile: string
  expectArtifact?: string
  /** A run config file: create an online run for this training run. */
  onlineRun?: string
  trainer?: string
  model?: string
  /** `<id>@<version>`. */
  dataset?: string
  /** The environment: the admin token, and RM_TOKEN for trainers without an online run. */
  env: Record<string, string | undefined>
  /** For tests: admin client overrides and the clock. */
  client?: Partial<Omit<AdminClientOptions, 'baseUrl' | 'token'>>
  now?: () => Date
}

/** What prepare did (no token in it: this is printed). */
export interface PrepareOutcome {
  training_run_id: string
  artifact_id: string
  deploy_id: string
  target: string
  edge_url: string
  online_run: { run_id: string; base_path: string } | null
  /** Where REWARD_HARNESS_TOKEN came from, or null when the env file has none. */
  token_source: 'online_run' | 'RM_TOKEN' | null
  env_file: string
  lineage: string
  manifest: TrainingRunManifest
}

/**
 * Parses `--dataset <id>@<version>` (split at the last `@`, so ids may contain one).
 * @example parseDatasetRef('gsm8k@v3') // { id: 'gsm8k', version: 'v3' }
 */
function parseDatasetRef(text: string | undefined): { id: string; version: string } {
  if (text === undefined) return { id: UNSPECIFIED, version: UNSPECIFIED }
  const at = text.lastIndexOf('@')
  const id = text.slice(0, at).trim()
  const version = text.slice(at + 1).trim()
  if (at === -1 || !id || !version) throw new UsageError(`--dataset "${text}": use <id>@<version>, e.g. gsm8k@v3`)
  return { id, version }
}

/**
 * Runs the whole prepare: checks, handshake, online run, manifest, env file.
 * @example const outcome = await prepareTraining({ url, target: 'prod', name: 'grpo-7', envFile: 'grpo-7.env',
 *   expectArtifact: 'rm_…', env: process.env })
 */
export async function prepareTraining(options: PrepareOptions): Promise<PrepareOutcome> {
  const checked = await checkPrepareInputs(options)
  const { target, edgeUrl, store, envFile, request, adminToken } = checked
  const client = connect({ url: edgeUrl, env: options.env, ...(options.client ? { client: options.client } : {}) })
  const { health, deployment } = await handshake(client, target, options.expectArtifact)
  await refuseRecordedRun(store, options.name)
  checkWritable(envFile, options.envFile)
  const online = request ? await createOnlineRun(edgeUrl, adminToken, request, options.client?.fetch) : undefined
  const rmToken = options.env.RM_TOKEN?.trim() || undefined
  const manifest = trainingManifest(options, checked, health, deployment, online)
  const pending = stageEnvFile(envFile, {
    [ENV.url]: edgeUrl,
    [ENV.token]: online?.token ?? rmToken,
    [ENV.runId]: online?.run_id,
    [ENV.target]: target,
    [ENV.artifactId]: health.artifact_id,
    [ENV.deployId]: deployment.deploy_id,
    [ENV.trainingRunId]: options.name,
    [ENV.lineageDb]: store.db,
    [ENV.lineageUrl]: store.url,
  })
  await recordManifest(store, manifest, pending, online)
  clearState(envFile)
  return {
    training_run_id: options.name,
    artifact_id: health.artifact_id,
    deploy_id: deployment.deploy_id,
    target,
    edge_url: edgeUrl,
    online_run: online ? { run_id: online.run_id, base_path: online.base_path } : null,
    token_source: online ? 'online_run' : rmToken ? 'RM_TOKEN' : null,
    env_file: envFile,
    lineage: describeStore(store),
    manifest,
  }
}

/** The flags of a prepare, checked before anything is asked of the edge. */
interface CheckedPrepare {
  target: string
  edgeUrl: string
  dataset: { id: string; version: string }
  trainer: string
  model: string
  store: ReturnType<typeof resolveStore>
  envFile: string
  request: Awaited<ReturnType<typeof readOnlineRunRequest>> | undefined
  adminToken: string
}

/** Checks every flag (and reads the online run's config) so a mistake is refused before any request. */
async function checkPrepareInputs(options: PrepareOptions): Promise<CheckedPrepare> {
  const name = LineageId.safeParse(options.name)
  if (!name.success) throw new UsageError(`--name "${options.name}": ${name.error.issues[0]?.message}`)
  const target = checkTarget(options.target)
  const edgeUrl = checkEdgeUrl(options.url)
  const adminToken = requireAdminToken(edgeUrl, options.env)
  const dataset = parseDatasetRef(options.dataset)
  const trainer = nonEmpty(options.trainer, '--trainer')
  const model = nonEmpty(options.model, '--model')
  const store = resolveStore(options)
  const envFile = path.resolve(options.envFile)
  const request =
    options.onlineRun === undefined ? undefined : await readOnlineRunRequest(options.onlineRun, options.name)
  return { target, edgeUrl, dataset, trainer, model, store, envFile, request, adminToken }
}

/** A training run id is recorded once: a second prepare under the same name is refused. */
async function refuseRecordedRun(store: ReturnType<typeof resolveStore>, name: string): Promise<void> {
  await withBackend(
    store,
    async (backend) => {
      const existing = await backend.chain(name)
      if (existing)
        throw new UsageError(
          `training run "${name}" is already recorded (started ${existing.manifest.started_at}): give another --name`,
        )
    },
    '--lineage-url',
  )
}

function checkWritable(envFile: string, flag: string): void {
  try {
    accessSync(path.dirname(envFile), constants.W_OK)
  } catch (error) {
    throw new UsageError(`--env-path ${flag}: cannot write there: ${(error as Error).message}`)
  }
}

/** The lineage manifest of the training run: what it trains, on which RM, from which edge. */
function trainingManifest(
  options: PrepareOptions,
  checked: CheckedPrepare,
  health: RmHealth,
  deployment: DeployRecord,
  online: { run_id: string } | undefined,
): TrainingRunManifest {
  return TrainingRunManifest.parse({
    schema_version: LINEAGE_SCHEMA_VERSION,
    run_id: options.name,
    ...(online ? { harness_run_id: online.run_id } : {}),
    trainer: { name: checked.trainer },
    model: { name: checked.model },
    dataset: checked.dataset,
    artifact_id: health.artifact_id,
    deploy_id: deployment.deploy_id,
    target: checked.target,
    config: {
      edge_url: checked.edgeUrl,
      online_run_id: online?.run_id ?? null,
      rm: {
        source_session_id: health.source_session_id,
        schema_version: health.schema_version,
        rm_api_version: health.rm_api_version,
      },
    },
    started_at: (options.now?.() ?? new Date()).toISOString(),
  })
}

/** Records the manifest, then commits the staged env file; a failed record leaves no env file behind. */
async function recordManifest(
  store: ReturnType<typeof resolveStore>,
  manifest: TrainingRunManifest,
  pending: { commit(): void; discard(): void },
  online: { run_id: string } | undefined,
): Promise<void> {
  try {
    await withBackend(store, (backend) => backend.recordManifest(manifest), '--lineage-url')
  } catch (error) {
    pending.discard()
    if (online && error instanceof Error)
      error.message += ` (the online run "${online.run_id}" was created; prepare again with another --name)`
    throw error
  }
  pending.commit()
}

/**
 * The handshake: the target exists and has a deployment, its healthz says "ok" and names the expected artifact, and
 * the deployment serving it is the newest record for that artifact. The list is asked first: an unknown target has an
 * empty one, while its healthz is a 503 the client would retry for seconds.
 * @example const { health, deployment } = await handshake(client, 'prod', 'rm_…')
 */
async function handshake(
  client: AdminClient,
  target: string,
  expectArtifact: string | undefined,
): Promise<{ health: RmHealth; deployment: DeployRecord }> {
  const unknown = (detail: string) =>
    new UsageError(
      `unknown target "${target}" on ${client.baseUrl}: ${detail} (deploy an artifact there first with ` +
        `\`reward-harness deploy\`)`,
    )
  const list = await client.deployments(target).catch((error: unknown) => {
    throw error instanceof EdgeHttpError && error.status === 404
      ? unknown(`${error.method} ${error.path} → 404`)
      : error
  })
  if (list.deployments.length === 0) throw unknown('it has no deployments')
  const health = await client.health(target).catch((error: unknown) => {
    throw error instanceof EdgeHttpError && error.status === 404
      ? unknown(`${error.method} ${error.path} → ${error.status} ${error.code}`)
      : error
  })
  if (health.status !== 'ok')
    throw new HandshakeRefusedError(`target "${target}" reports status "${health.status}", not "ok"`)
  if (expectArtifact !== undefined && health.artifact_id !== expectArtifact) {
    throw new HandshakeRefusedError(
      `target "${target}" serves ${health.artifact_id}, not the expected ${expectArtifact}`,
    )
  }
  const deployment = list.deployments.find((record) => record.artifact_id === health.artifact_id)
  const healthDeployId = typeof health.deploy_id === 'string' ? health.deploy_id : undefined
  if (
    !deployment ||
    list.active_artifact_id !== health.artifact_id ||
    (healthDeployId !== undefined && healthDeployId !== deployment.deploy_id)
  ) {
    throw new HandshakeRefusedError(
      `target "${target}" changed during the handshake (healthz names ${health.artifact_id}, the deployments list ` +
        `${list.active_artifact_id}): prepare again`,
    )
  }
  return { health, deployment }
}

/** The edge's base URL; one with credentials or a `/t/<token>` path would put a secret into lineage and logs. */
function checkEdgeUrl(value: string): string {
  const url = checkUrl(value, '--url')
  const parsed = new URL(url)
  if (parsed.username || parsed.password || /(^|\/)t\/[^/]+/.test(parsed.pathname.slice(1)) || parsed.search) {
    throw new UsageError(
      `--url: give the edge's base URL (e.g. https://rm.example.com), without a token, credentials or query`,
    )
  }
  return url
}

function nonEmpty(value: string | undefined, flag: string): string {
  if (value === undefined) return UNSPECIFIED
  if (!value.trim()) throw new UsageError(`${flag}: must not be empty`)
  return value.trim()
}
