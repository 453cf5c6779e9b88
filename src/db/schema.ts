import { index, integer, real, sqliteTable, text } from 'drizzle-orm/sqlite-core'

/** Runs created through `POST /runs`; the default run lives in config/default-run.json. */
export const runs = sqliteTable('runs', {
  id: text('id').primaryKey(),
  config: text('config', { mode: 'json' }).notNull(),
  createdAt: text('created_at').notNull(),
})

/** Bearer tokens scoped to one run. Only the SHA-256 of a token is stored. */
export const runTokens = sqliteTable('run_tokens', {
  tokenHash: text('token_hash').primaryKey(),
  runId: text('run_id').notNull().references(() => runs.id),
  createdAt: text('created_at').notNull(),
}, (t) => [index('run_tokens_run_idx').on(t.runId)])

/** Every score served, duplicates and cache hits included, for dashboards and audits. */
export const scoreEvents = sqliteTable('score_events', {
  id: integer('id').primaryKey({ autoIncrement: true }),
  runId: text('run_id').notNull(),
  instanceId: text('instance_id').notNull(),
  rolloutId: text('rollout_id').notNull(),
  step: integer('step').notNull(),
  rubricVersion: integer('rubric_version').notNull(),
  score: real('score').notNull(),
  criteria: text('criteria', { mode: 'json' }).notNull(),
  cached: integer('cached', { mode: 'boolean' }).notNull(),
  duplicate: integer('duplicate', { mode: 'boolean' }).notNull(),
  requestId: text('request_id').notNull(),
  createdAt: text('created_at').notNull(),
}, (t) => [index('score_events_run_step_idx').on(t.runId, t.step)])

/** One row per LLM call attempt: who asked, which model, what it cost, how it ended. No prompt text. */
export const llmCalls = sqliteTable('llm_calls', {
  id: integer('id').primaryKey({ autoIncrement: true }),
  runId: text('run_id').notNull(),
  role: text('role').notNull(),
  model: text('model').notNull(),
  outcome: text('outcome').notNull(),
  latencyMs: integer('latency_ms').notNull(),
  promptTokens: integer('prompt_tokens').notNull(),
  completionTokens: integer('completion_tokens').notNull(),
  requestId: text('request_id'),
  createdAt: text('created_at').notNull(),
}, (t) => [index('llm_calls_run_idx').on(t.runId, t.createdAt)])

/**
 * Long-term memory: analyses, batch and meta summaries and rubric updates, per run and instance.
 * Ids are derived from (kind, run, instance, step, subject), so a retried job writes the same row once.
 */
export const memoryDocuments = sqliteTable('memory_documents', {
  id: text('id').primaryKey(),
  runId: text('run_id').notNull(),
  instanceId: text('instance_id').notNull(),
  kind: text('kind').notNull(),
  step: integer('step').notNull(),
  subject: text('subject'),
  text: text('text').notNull(),
  data: text('data', { mode: 'json' }).notNull(),
  createdAt: text('created_at').notNull(),
}, (t) => [index('memory_run_instance_kind_step_idx').on(t.runId, t.instanceId, t.kind, t.step)])
