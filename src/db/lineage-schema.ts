import { index, integer, sqliteTable, text } from 'drizzle-orm/sqlite-core'

/**
 * Training runs' manifests (src/lineage/schemas.ts TrainingRunManifest), one row per run: the searchable fields as
 * columns, the full manifest as JSON. `started_at_ms` orders runs by time ("latest" = the greatest, never a string
 * sort). Used by the edge (D1) and offline (a local SQLite file through better-sqlite3).
 */
export const lineageRuns = sqliteTable(
  'lineage_runs',
  {
    runId: text('run_id').primaryKey(),
    harnessRunId: text('harness_run_id'),
    artifactId: text('artifact_id').notNull(),
    deployId: text('deploy_id'),
    target: text('target'),
    datasetId: text('dataset_id').notNull(),
    datasetVersion: text('dataset_version').notNull(),
    startedAt: text('started_at').notNull(),
    startedAtMs: integer('started_at_ms').notNull(),
    manifest: text('manifest', { mode: 'json' }).notNull(),
    recordedAt: text('recorded_at').notNull(),
  },
  (t) => [
    index('lineage_runs_artifact_idx').on(t.artifactId, t.startedAtMs),
    index('lineage_runs_dataset_idx').on(t.datasetVersion, t.startedAtMs),
    index('lineage_runs_started_idx').on(t.startedAtMs),
  ],
)

/** A training run's result (TrainingRunResult): written once, never overwritten. */
export const lineageResults = sqliteTable(
  'lineage_results',
  {
    runId: text('run_id')
      .primaryKey()
      .references(() => lineageRuns.runId),
    status: text('status').notNull(),
    finishedAt: text('finished_at').notNull(),
    result: text('result', { mode: 'json' }).notNull(),
    recordedAt: text('recorded_at').notNull(),
  },
  (t) => [index('lineage_results_status_idx').on(t.status)],
)

/** Evaluation reports (EvalReport) of training runs, any number per run and benchmark. */
export const lineageEvals = sqliteTable(
  'lineage_evals',
  {
    evalId: text('eval_id').primaryKey(),
    runId: text('run_id')
      .notNull()
      .references(() => lineageRuns.runId),
    benchmark: text('benchmark').notNull(),
    createdAt: text('created_at').notNull(),
    createdAtMs: integer('created_at_ms').notNull(),
    report: text('report', { mode: 'json' }).notNull(),
    recordedAt: text('recorded_at').notNull(),
  },
  (t) => [index('lineage_evals_run_idx').on(t.runId, t.benchmark, t.createdAtMs)],
)
