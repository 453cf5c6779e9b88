import { index, integer, primaryKey, sqliteTable, text } from 'drizzle-orm/sqlite-core'

/** Runs created through `POST /runs`; the default run lives in config/default-run.json. */
export const runs = sqliteTable('runs', {
  id: text('id').primaryKey(),
  config: text('config', { mode: 'json' }).notNull(),
  createdAt: text('created_at').notNull(),
})

/**
 * Bearer tokens scoped to one run. Only the SHA-256 of a token is stored, with its first characters (`rh_` and 8 hex
 * digits, null for tokens from before they were kept) so an operator can name it; a revoked token stays, refused.
 */
export const runTokens = sqliteTable(
  'run_tokens',
  {
    tokenHash: text('token_hash').primaryKey(),
    runId: text('run_id')
      .notNull()
      .references(() => runs.id),
    createdAt: text('created_at').notNull(),
    prefix: text('prefix'),
    revokedAt: text('revoked_at'),
  },
  (t) => [index('run_tokens_run_idx').on(t.runId)],
)

/**
 * What a run has spent of a budget counted in the Worker, per window (a clock hour of
 * `budgets.memory_searches_per_hour`, as the epoch hour): one row per run, budget and window, its count raised in
 * place; rows of past windows are deleted as the next window's first spend writes.
 */
export const budgetSpend = sqliteTable(
  'budget_spend',
  {
    runId: text('run_id').notNull(),
    budget: text('budget').notNull(),
    windowIndex: integer('window_index').notNull(),
    spent: integer('spent').notNull(),
  },
  (t) => [primaryKey({ columns: [t.runId, t.budget, t.windowIndex] })],
)

/**
 * Dashboard logins: the cookie carries only the id, signed; the row says whom it stands for (the SHA-256 of the token
 * logged in with, re-checked on every page so a revoked token or a rotated admin token ends the session), until when,
 * and whether it was logged out.
 */
export const dashboardSessions = sqliteTable('dashboard_sessions', {
  id: text('id').primaryKey(),
  kind: text('kind', { enum: ['admin', 'run'] }).notNull(),
  runId: text('run_id'),
  tokenHash: text('token_hash').notNull(),
  createdAt: text('created_at').notNull(),
  expiresAt: text('expires_at').notNull(),
  revokedAt: text('revoked_at'),
})

/** Who created or revoked which run token, and when (the token named by its hash's first 12 hex digits). */
export const tokenAudit = sqliteTable(
  'token_audit',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    runId: text('run_id').notNull(),
    tokenId: text('token_id').notNull(),
    action: text('action', { enum: ['created', 'revoked'] }).notNull(),
    actor: text('actor').notNull(),
    at: text('at').notNull(),
  },
  (t) => [index('token_audit_run_idx').on(t.runId)],
)

/**
 * Long-term memory: analyses, batch and meta summaries and rubric updates, per run and instance.
 * Ids are derived from (kind, run, instance, step, subject), so a retried job writes the same row once.
 */
export const memoryDocuments = sqliteTable(
  'memory_documents',
  {
    id: text('id').primaryKey(),
    runId: text('run_id').notNull(),
    instanceId: text('instance_id').notNull(),
    kind: text('kind').notNull(),
    step: integer('step').notNull(),
    subject: text('subject'),
    text: text('text').notNull(),
    data: text('data', { mode: 'json' }).notNull(),
    createdAt: text('created_at').notNull(),
  },
  (t) => [index('memory_run_instance_kind_step_idx').on(t.runId, t.instanceId, t.kind, t.step)],
)

/**
 * RM artifacts uploaded through `POST /admin/artifacts`: one row per content-addressed artifact, holding the
 * artifact minus its rubrics (`meta`); the rubrics live in `rm_artifact_rubrics`, one row per prompt id.
 */
export const rmArtifacts = sqliteTable('rm_artifacts', {
  id: text('id').primaryKey(),
  schemaVersion: text('schema_version').notNull(),
  sourceRunId: text('source_run_id').notNull(),
  sourceSessionId: text('source_session_id').notNull(),
  datasetSha256: text('dataset_sha256').notNull(),
  configHash: text('config_hash').notNull(),
  backend: text('backend').notNull(),
  rubricCount: integer('rubric_count').notNull(),
  createdAtUtc: text('created_at_utc').notNull(),
  meta: text('meta', { mode: 'json' }).notNull(),
  storedAt: text('stored_at').notNull(),
})

/**
 * An artifact's rubrics, addressed by (artifact id, prompt id); `__default__` serves prompts the artifact never saw.
 */
export const rmArtifactRubrics = sqliteTable(
  'rm_artifact_rubrics',
  {
    artifactId: text('artifact_id')
      .notNull()
      .references(() => rmArtifacts.id),
    promptId: text('prompt_id').notNull(),
    rubric: text('rubric', { mode: 'json' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.artifactId, t.promptId] })],
)

/**
 * Deploy records per target, append-only: the newest row of a target is its active deployment (so a deploy or a
 * rollback is one INSERT). `llm` is the deployment's OpenAI-compatible endpoint, when it named one.
 */
export const rmDeployments = sqliteTable(
  'rm_deployments',
  {
    seq: integer('seq').primaryKey({ autoIncrement: true }),
    deployId: text('deploy_id').notNull().unique(),
    target: text('target').notNull(),
    artifactId: text('artifact_id')
      .notNull()
      .references(() => rmArtifacts.id),
    previousArtifactId: text('previous_artifact_id'),
    deployedBy: text('deployed_by').notNull(),
    deployedAt: text('deployed_at').notNull(),
    action: text('action').notNull(),
    datasetSha256: text('dataset_sha256').notNull(),
    configHash: text('config_hash').notNull(),
    llm: text('llm', { mode: 'json' }),
  },
  (t) => [index('rm_deployments_target_seq_idx').on(t.target, t.seq)],
)
export * from './lineage-schema.ts'
