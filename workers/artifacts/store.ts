/**
 * D1 storage of RM artifacts and deployments.
 *
 * - An artifact is one `rm_artifacts` row (everything but its rubrics) plus one `rm_artifact_rubrics` row per
 *   prompt id. Artifacts are content-addressed and never change, so an isolate keeps the few it serves, parsed.
 * - Deployments are append-only `rm_deployments` rows; a target's newest row is its active deployment. A deploy or
 *   a rollback is ONE conditional INSERT that only lands while the newest row is still the one the caller read,
 *   so two concurrent deploys cannot both claim the same `previous_artifact_id`, and a failure changes nothing.
 */
import { LRUCache } from 'lru-cache'
import { redactStored } from '../../src/credentials/literal.ts'
import { and, desc, eq, lt } from 'drizzle-orm'
import { drizzle } from 'drizzle-orm/d1'
import { rmArtifactRubrics, rmArtifacts, rmDeployments } from '../../src/db/schema.ts'
import { AnyRmArtifact, artifactOrigin, verifyArtifactId, type DeployRecord } from '../../src/schemas/artifact.ts'
import type { SearchRubric } from '../../src/schemas/search-rubric.ts'
import type { DeploymentLlm } from './llm.ts'

/** D1 binds at most 100 parameters per statement; a rubric row binds 3. */
const RUBRIC_ROWS_PER_INSERT = 30
/** Parsed artifacts an isolate keeps (least recently used goes first). */
const CACHED_ARTIFACTS = 8

/** A deployment as stored: the public record, its position in the target's history, and its endpoint. */
export interface StoredDeployment extends DeployRecord {
  seq: number
  llm: DeploymentLlm | null
}

/**
 * Stores a validated artifact; `stored: false` when it was already there (uploads are idempotent).
 * @example const { stored } = await storeArtifact(env.DB, artifact) // true the first time
 */
export async function storeArtifact(db: D1Database, artifact: AnyRmArtifact): Promise<{ stored: boolean }> {
  const orm = drizzle(db)
  const known = await orm
    .select({ id: rmArtifacts.id })
    .from(rmArtifacts)
    .where(eq(rmArtifacts.id, artifact.artifact_id))
    .get()
  if (known) return { stored: false }
  // A library artifact has no rubric rows: its entries travel in `meta`.
  const { artifact_id: id, ...rest } = artifact
  let meta: object = rest
  let rows: { artifactId: string; promptId: string; rubric: SearchRubric }[] = []
  if (rest.kind === 'rubric') {
    const { rubrics, ...withoutRubrics } = rest
    meta = withoutRubrics
    rows = Object.entries(rubrics).map(([promptId, rubric]) => ({ artifactId: id, promptId, rubric }))
  }
  const origin = artifactOrigin(artifact)
  const insertArtifact = orm
    .insert(rmArtifacts)
    .values({
      id,
      schemaVersion: artifact.schema_version,
      sourceRunId: origin.source_run_id,
      sourceSessionId: origin.source_session_id,
      datasetSha256: origin.dataset_sha256,
      configHash: origin.config_hash,
      backend: artifact.runtime.backend,
      rubricCount: rows.length,
      createdAtUtc: artifact.created_at_utc,
      meta,
      storedAt: new Date().toISOString(),
    })
    .onConflictDoNothing()
    .returning({ id: rmArtifacts.id })
  const insertRubrics = []
  for (let start = 0; start < rows.length; start += RUBRIC_ROWS_PER_INSERT) {
    insertRubrics.push(
      orm
        .insert(rmArtifactRubrics)
        .values(rows.slice(start, start + RUBRIC_ROWS_PER_INSERT))
        .onConflictDoNothing(),
    )
  }
  // One batch is one transaction: the artifact never exists without all of its rubrics.
  const [inserted] = await orm.batch([insertArtifact, ...insertRubrics])
  return { stored: inserted.length > 0 }
}

const cache = new LRUCache<string, AnyRmArtifact>({ max: CACHED_ARTIFACTS })

/**
 * A stored artifact, parsed and checked against its content address; kept per isolate by id (artifacts are
 * immutable, so the cache is never stale). Undefined when no such artifact is stored. Only loaded artifacts are
 * kept, never a read in flight: a request must not wait on another request's I/O, which the Workers runtime cancels
 * as hung, so requests that miss together each read.
 * @example const artifact = await loadArtifact(env.DB, deployment.artifact_id)
 */
export async function loadArtifact(db: D1Database, artifactId: string): Promise<AnyRmArtifact | undefined> {
  const cached = cache.get(artifactId)
  if (cached) return cached
  const artifact = await readArtifact(db, artifactId)
  if (artifact) cache.set(artifactId, artifact)
  return artifact
}

async function readArtifact(db: D1Database, artifactId: string): Promise<AnyRmArtifact | undefined> {
  const orm = drizzle(db)
  const [rows, rubricRows] = await orm.batch([
    orm.select({ meta: rmArtifacts.meta }).from(rmArtifacts).where(eq(rmArtifacts.id, artifactId)),
    orm
      .select({ promptId: rmArtifactRubrics.promptId, rubric: rmArtifactRubrics.rubric })
      .from(rmArtifactRubrics)
      .where(eq(rmArtifactRubrics.artifactId, artifactId)),
  ])
  const row = rows[0]
  if (!row) return undefined
  const rubrics: Record<string, SearchRubric> = {}
  for (const { promptId, rubric } of [...rubricRows].sort((a, b) =>
    a.promptId < b.promptId ? -1 : a.promptId > b.promptId ? 1 : 0,
  )) {
    rubrics[promptId] = rubric as SearchRubric
  }
  const meta = row.meta as { kind?: unknown }
  const artifact = AnyRmArtifact.parse(
    meta.kind === 'library' ? { ...meta, artifact_id: artifactId } : { ...meta, rubrics, artifact_id: artifactId },
  )
  if (!(await verifyArtifactId(artifact)))
    throw new Error(`stored artifact ${artifactId} no longer matches its content address`)
  return artifact
}

/**
 * How long an isolate serves a target's active deployment before reading D1 again: a deploy or rollback through
 * another isolate (another location) takes effect within this; through this isolate, at once.
 * @internal
 */
export const SERVING_DEPLOYMENT_TTL_MS = 2_000

/** A target's active deployment (null: none) as this isolate last read it, and when. */
const serving = new LRUCache<string, { deployment: StoredDeployment | null; readAt: number }>({ max: 256 })

/**
 * The deployment `/rm/<target>` serves: the target's active deployment as read at most
 * {@link SERVING_DEPLOYMENT_TTL_MS} ago by this isolate, or undefined when nothing is deployed there. While the
 * deployment stays the same, the same object is returned, so callers may key their own caches on it. A stale entry
 * is read again by each request that finds it stale, never awaited from another request: the Workers runtime
 * cancels a request that waits on another request's I/O as hung.
 * @example const deployment = await servingDeployment(env.DB, 'prod')
 */
export async function servingDeployment(db: D1Database, target: string): Promise<StoredDeployment | undefined> {
  const cached = serving.get(target)
  if (cached && Date.now() - cached.readAt < SERVING_DEPLOYMENT_TTL_MS) return cached.deployment ?? undefined
  const read = (await activeDeployment(db, target)) ?? null
  const known = serving.get(target)?.deployment
  const deployment = known && read && known.seq === read.seq ? known : read
  serving.set(target, { deployment, readAt: Date.now() })
  return deployment ?? undefined
}

/** Earlier records a rollback looks through for one that served something else (redeploys of the same pair). */
const PREVIOUS_SCAN = 100

/**
 * A target's active deployment (its newest record), or undefined when nothing was ever deployed there.
 * One indexed D1 read, never cached: what deploy, rollback and the admin routes read.
 * @example const active = await activeDeployment(env.DB, 'prod')
 */
export async function activeDeployment(db: D1Database, target: string): Promise<StoredDeployment | undefined> {
  const row = await drizzle(db)
    .select()
    .from(rmDeployments)
    .where(eq(rmDeployments.target, target))
    .orderBy(desc(rmDeployments.seq))
    .limit(1)
    .get()
  return row ? toStored(row) : undefined
}

/**
 * A target's deployment history, newest first.
 * @example const history = await listDeployments(env.DB, 'prod', 100)
 */
export async function listDeployments(db: D1Database, target: string, limit: number): Promise<StoredDeployment[]> {
  const rows = await drizzle(db)
    .select()
    .from(rmDeployments)
    .where(eq(rmDeployments.target, target))
    .orderBy(desc(rmDeployments.seq))
    .limit(limit)
    .all()
  return rows.map(toStored)
}

/**
 * The deployment a rollback of `active` returns to: the newest earlier record of the target that served something
 * else (another artifact, or the same artifact with another judge), or undefined when there is none.
 * @example const previous = await previousDeployment(env.DB, active)
 */
export async function previousDeployment(
  db: D1Database,
  active: StoredDeployment,
): Promise<StoredDeployment | undefined> {
  const rows = await drizzle(db)
    .select()
    .from(rmDeployments)
    .where(and(eq(rmDeployments.target, active.target), lt(rmDeployments.seq, active.seq)))
    .orderBy(desc(rmDeployments.seq))
    .limit(PREVIOUS_SCAN)
    .all()
  const serving = JSON.stringify(active.llm)
  return rows.map(toStored).find((row) => row.artifact_id !== active.artifact_id || JSON.stringify(row.llm) !== serving)
}

/**
 * Appends a deploy record if the target's newest record is still `expectedSeq` (0 = none); false when another
 * deployment landed in between (read again and retry).
 * @example if (!(await appendDeployment(env.DB, record, llm, active?.seq ?? 0))) retry()
 */
export async function appendDeployment(
  db: D1Database,
  record: DeployRecord,
  llm: DeploymentLlm | null,
  expectedSeq: number,
): Promise<boolean> {
  const result = await db
    .prepare(
      `INSERT INTO rm_deployments (deploy_id, target, artifact_id, previous_artifact_id, deployed_by, deployed_at,
         action, dataset_sha256, config_hash, llm)
       SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10
       WHERE coalesce((SELECT max(seq) FROM rm_deployments WHERE target = ?2), 0) = ?11`,
    )
    .bind(
      record.deploy_id,
      record.target,
      record.artifact_id,
      record.previous_artifact_id,
      record.deployed_by,
      record.deployed_at,
      record.action,
      record.dataset_sha256,
      record.config_hash,
      llm === null ? null : JSON.stringify(llm),
      expectedSeq,
    )
    .run()
  serving.delete(record.target)
  return result.meta.changes > 0
}

function toStored(row: typeof rmDeployments.$inferSelect): StoredDeployment {
  return {
    seq: row.seq,
    deploy_id: row.deployId,
    target: row.target,
    artifact_id: row.artifactId,
    previous_artifact_id: row.previousArtifactId,
    deployed_by: row.deployedBy,
    deployed_at: row.deployedAt,
    action: row.action === 'rollback' ? 'rollback' : 'deploy',
    dataset_sha256: row.datasetSha256,
    config_hash: row.configHash,
    // Stored before literal credentials were refused, a deployment's llm is read back without them.
    llm: redactStored('deployment', `${row.target}#${row.seq}`, (row.llm as DeploymentLlm | null) ?? null),
  }
}

/**
 * The public record of a stored deployment (no sequence number, no endpoint).
 * @example c.json(publicRecord(active))
 */
export function publicRecord(stored: StoredDeployment): DeployRecord {
  const { seq: _seq, llm: _llm, ...record } = stored
  return record
}
