import { and, desc, eq, inArray, type SQL } from 'drizzle-orm'
import type { BaseSQLiteDatabase } from 'drizzle-orm/sqlite-core'
import { lineageEvals, lineageResults, lineageRuns } from '../db/lineage-schema.ts'
import { rmDeployments } from '../db/schema.ts'
import { canonicalJson } from '../hash/index.ts'
import {
  EvalReport,
  type LineageChain,
  type RunFilter,
  type RunSummary,
  TrainingRunManifest,
  TrainingRunResult,
} from './schemas.ts'
import { UsageError } from '../usage-error/index.ts'

/** A drizzle SQLite database: D1 at the edge, better-sqlite3 offline. Every query is awaited, so either mode works. */
export type LineageDb = BaseSQLiteDatabase<'sync' | 'async', unknown, Record<string, never>>

/** Why a record was refused: `conflict` (a different payload under the same id), `missing` (no manifest / run). */
export class LineageError extends UsageError {
  override name = 'LineageError'
  constructor(
    readonly kind: 'conflict' | 'missing',
    message: string,
  ) {
    super(message)
  }
}

/** What a record call did: `stored` false when the identical payload was already there (idempotent). */
export interface RecordOutcome {
  run_id: string
  stored: boolean
}

const now = () => new Date().toISOString()
const same = (a: unknown, b: unknown) => canonicalJson(a) === canonicalJson(b)

/**
 * Records a training run's manifest. The same payload again is a no-op (`stored: false`); a different one under the
 * same run id is a `conflict`. Insert-if-absent is one statement, so two writers cannot both win.
 * @example await recordManifest(db, TrainingRunManifest.parse(json))
 */
export async function recordManifest(db: LineageDb, input: TrainingRunManifest): Promise<RecordOutcome> {
  const manifest = TrainingRunManifest.parse(input)
  const inserted = await db
    .insert(lineageRuns)
    .values({
      runId: manifest.run_id,
      harnessRunId: manifest.harness_run_id ?? null,
      artifactId: manifest.artifact_id,
      deployId: manifest.deploy_id ?? null,
      target: manifest.target ?? null,
      datasetId: manifest.dataset.id,
      datasetVersion: manifest.dataset.version,
      startedAt: manifest.started_at,
      startedAtMs: Date.parse(manifest.started_at),
      manifest,
      recordedAt: now(),
    })
    .onConflictDoNothing()
    .returning({ runId: lineageRuns.runId })
  if (inserted.length > 0) return { run_id: manifest.run_id, stored: true }
  const [existing] = await db
    .select({ manifest: lineageRuns.manifest })
    .from(lineageRuns)
    .where(eq(lineageRuns.runId, manifest.run_id))
  if (existing && same(existing.manifest, manifest)) return { run_id: manifest.run_id, stored: false }
  throw new LineageError('conflict', `run "${manifest.run_id}" already has a different manifest`)
}

async function requireManifest(db: LineageDb, runId: string): Promise<TrainingRunManifest> {
  const [row] = await db
    .select({ manifest: lineageRuns.manifest })
    .from(lineageRuns)
    .where(eq(lineageRuns.runId, runId))
  if (!row) throw new LineageError('missing', `run "${runId}" has no manifest: record it first`)
  return row.manifest as TrainingRunManifest
}

/**
 * Records a run's result (needs its manifest; never overwritten: an identical payload is a no-op, another a conflict).
 * @example await recordResult(db, TrainingRunResult.parse(json))
 */
export async function recordResult(db: LineageDb, input: TrainingRunResult): Promise<RecordOutcome> {
  const result = TrainingRunResult.parse(input)
  await requireManifest(db, result.run_id)
  const inserted = await db
    .insert(lineageResults)
    .values({
      runId: result.run_id,
      status: result.status,
      finishedAt: result.finished_at,
      result,
      recordedAt: now(),
    })
    .onConflictDoNothing()
    .returning({ runId: lineageResults.runId })
  if (inserted.length > 0) return { run_id: result.run_id, stored: true }
  const [existing] = await db
    .select({ result: lineageResults.result })
    .from(lineageResults)
    .where(eq(lineageResults.runId, result.run_id))
  if (existing && same(existing.result, result)) return { run_id: result.run_id, stored: false }
  throw new LineageError(
    'conflict',
    `run "${result.run_id}" already has a different result (results are never overwritten)`,
  )
}

/**
 * Records an eval report (needs the run's manifest; identical → no-op, a different payload under the eval id →
 * conflict).
 * @example await recordEval(db, EvalReport.parse(json))
 */
export async function recordEval(db: LineageDb, input: EvalReport): Promise<RecordOutcome> {
  const report = EvalReport.parse(input)
  await requireManifest(db, report.run_id)
  const inserted = await db
    .insert(lineageEvals)
    .values({
      evalId: report.eval_id,
      runId: report.run_id,
      benchmark: report.benchmark,
      createdAt: report.created_at,
      createdAtMs: Date.parse(report.created_at),
      report,
      recordedAt: now(),
    })
    .onConflictDoNothing()
    .returning({ evalId: lineageEvals.evalId })
  if (inserted.length > 0) return { run_id: report.run_id, stored: true }
  const [existing] = await db
    .select({ report: lineageEvals.report })
    .from(lineageEvals)
    .where(eq(lineageEvals.evalId, report.eval_id))
  if (existing && same(existing.report, report)) return { run_id: report.run_id, stored: false }
  throw new LineageError('conflict', `eval "${report.eval_id}" already exists with a different payload`)
}

/**
 * A run's chain: artifact → deployment (joined from rm_deployments when the deploy id is known here) → run → evals.
 * Undefined when the run has no manifest.
 * @example const chain = await loadChain(db, 'grpo-1')
 */
export async function loadChain(db: LineageDb, runId: string): Promise<LineageChain | undefined> {
  const [run] = await db.select().from(lineageRuns).where(eq(lineageRuns.runId, runId))
  if (!run) return undefined
  const [resultRow] = await db
    .select({ result: lineageResults.result })
    .from(lineageResults)
    .where(eq(lineageResults.runId, runId))
  const evalRows = await db
    .select({ report: lineageEvals.report })
    .from(lineageEvals)
    .where(eq(lineageEvals.runId, runId))
    .orderBy(lineageEvals.createdAtMs, lineageEvals.evalId)
  let deployment: LineageChain['deployment'] = null
  if (run.deployId) {
    const [record] = await db.select().from(rmDeployments).where(eq(rmDeployments.deployId, run.deployId))
    if (record)
      deployment = {
        deploy_id: record.deployId,
        target: record.target,
        artifact_id: record.artifactId,
        deployed_at: record.deployedAt,
        action: record.action,
      }
  }
  return {
    run_id: run.runId,
    artifact_id: run.artifactId,
    deploy_id: run.deployId ?? null,
    target: run.target ?? deployment?.target ?? null,
    deployment,
    manifest: run.manifest as TrainingRunManifest,
    result: (resultRow?.result as TrainingRunResult | undefined) ?? null,
    evals: evalRows.map((row) => row.report as EvalReport),
  }
}

/**
 * Runs matching every given filter (artifact, dataset version, status combine), newest first by start time.
 * @example const [latest] = await listRuns(db, { artifact_id: 'rm_…', status: 'succeeded', limit: 1 })
 */
export async function listRuns(db: LineageDb, filter: RunFilter = {}): Promise<RunSummary[]> {
  const conditions: SQL[] = []
  if (filter.artifact_id !== undefined) conditions.push(eq(lineageRuns.artifactId, filter.artifact_id))
  if (filter.dataset_version !== undefined) conditions.push(eq(lineageRuns.datasetVersion, filter.dataset_version))
  if (filter.status !== undefined) conditions.push(eq(lineageResults.status, filter.status))
  const rows = await db
    .select({
      run_id: lineageRuns.runId,
      artifact_id: lineageRuns.artifactId,
      dataset_version: lineageRuns.datasetVersion,
      started_at: lineageRuns.startedAt,
      status: lineageResults.status,
    })
    .from(lineageRuns)
    .leftJoin(lineageResults, eq(lineageResults.runId, lineageRuns.runId))
    .where(conditions.length > 0 ? and(...conditions) : undefined)
    .orderBy(desc(lineageRuns.startedAtMs), desc(lineageRuns.runId))
    .limit(Math.min(Math.max(filter.limit ?? 100, 1), 1000))
  return rows.map((row) => ({ ...row, status: (row.status ?? null) as RunSummary['status'] }))
}

/**
 * The harness run allowed to see each of the given training runs (null: admin only).
 * @example const owners = await harnessRunsOf(db, ['grpo-1'])
 */
export async function harnessRunsOf(db: LineageDb, runIds: string[]): Promise<Map<string, string | null>> {
  if (runIds.length === 0) return new Map()
  const rows = await db
    .select({ runId: lineageRuns.runId, harnessRunId: lineageRuns.harnessRunId })
    .from(lineageRuns)
    .where(inArray(lineageRuns.runId, runIds))
  return new Map(rows.map((row) => [row.runId, row.harnessRunId ?? null]))
}
