import { z } from 'zod'

export const LINEAGE_SCHEMA_VERSION = '1.0'

const SchemaVersion = z.literal(LINEAGE_SCHEMA_VERSION, {
  message: `schema_version must be "${LINEAGE_SCHEMA_VERSION}"`,
})
/** Ids are file- and URL-safe: letters, digits, `.`, `_`, `-`. */
export const LineageId = z.string().regex(/^[A-Za-z0-9._-]{1,128}$/, 'an id is 1–128 letters, digits, ".", "_" or "-"')
const NonEmpty = z.string().trim().min(1, 'must not be empty')
/** An ISO-8601 time with a date and a time of day; compared as instants, never as strings. */
export const Timestamp = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/, 'must be an ISO-8601 time such as 2026-01-31T12:00:00Z')
  .refine((value) => !Number.isNaN(Date.parse(value)), 'must be a valid ISO-8601 time')
/** Named numeric metrics (finite numbers only). */
export const Metrics = z.record(NonEmpty, z.number())

/**
 * What a training run was: trainer, model, dataset, the RM artifact (and the deployment / target) that scored it.
 * @example TrainingRunManifest.parse({ schema_version: '1.0', run_id: 'grpo-1', trainer: { name: 'verl' }, model: {
 *   name: 'qwen-7b' }, dataset: { id: 'math', version: 'v3' }, artifact_id: 'rm_…', deploy_id: 'dep_…', target: 'prod',
 * started_at: '2026-01-01T00:00:00Z' })
 */
export const TrainingRunManifest = z.object({
  schema_version: SchemaVersion,
  run_id: LineageId,
  /** The reward-harness run whose token may record and read this training run (optional). */
  harness_run_id: LineageId.optional(),
  trainer: z.object({ name: NonEmpty, code_version: z.string().optional(), entrypoint: z.string().optional() }),
  model: z.object({ name: NonEmpty, revision: z.string().optional() }),
  dataset: z.object({ id: NonEmpty, version: NonEmpty, split: z.string().optional() }),
  artifact_id: NonEmpty,
  deploy_id: NonEmpty.optional(),
  target: NonEmpty.optional(),
  config: z.record(z.string(), z.unknown()).default({}),
  started_at: Timestamp,
  tags: z.array(z.string()).optional(),
  notes: z.string().optional(),
})
export type TrainingRunManifest = z.infer<typeof TrainingRunManifest>

/**
 * How a training run ended.
 * @example TrainingRunResult.parse({ schema_version: '1.0', run_id: 'grpo-1', status: 'succeeded', metrics: { reward:
 *   0.7 }, finished_at: '2026-01-02T00:00:00Z' })
 */
export const TrainingRunResult = z
  .object({
    schema_version: SchemaVersion,
    run_id: LineageId,
    status: z.enum(['succeeded', 'failed', 'canceled']),
    metrics: Metrics.default({}),
    finished_at: Timestamp,
    failure: z.object({ message: NonEmpty, stage: z.string().optional() }).optional(),
  })
  .refine((result) => result.status === 'succeeded' || result.failure !== undefined, {
    message: 'a failed or canceled run needs failure.message',
    path: ['failure'],
  })
export type TrainingRunResult = z.infer<typeof TrainingRunResult>

/**
 * One benchmark evaluation of a training run.
 * @example EvalReport.parse({ schema_version: '1.0', eval_id: 'e1', run_id: 'grpo-1', benchmark: 'gsm8k', metrics: {
 *   accuracy: 0.81 }, created_at: '2026-01-02T01:00:00Z' })
 */
export const EvalReport = z.object({
  schema_version: SchemaVersion,
  eval_id: LineageId,
  run_id: LineageId,
  benchmark: NonEmpty,
  benchmark_version: z.string().optional(),
  metrics: Metrics.refine((metrics) => Object.keys(metrics).length > 0, 'an eval report needs at least one metric'),
  created_at: Timestamp,
  summary: z.string().optional(),
})
export type EvalReport = z.infer<typeof EvalReport>

/** The deployment a run was scored by, as the edge recorded it (rm_deployments), when known. */
export interface LineageDeployment {
  deploy_id: string
  target: string
  artifact_id: string
  deployed_at: string
  action: string
}

/** A training run's lineage: artifact → deployment → run (manifest, result) → evals (oldest first). */
export interface LineageChain {
  run_id: string
  artifact_id: string
  deploy_id: string | null
  target: string | null
  /** The edge's deploy record for `deploy_id`, when this store has it. */
  deployment: LineageDeployment | null
  manifest: TrainingRunManifest
  result: TrainingRunResult | null
  evals: EvalReport[]
}

/** Combinable filters for listing runs (all given filters apply). */
export interface RunFilter {
  artifact_id?: string
  dataset_version?: string
  status?: TrainingRunResult['status']
  limit?: number
}

/** A listed run: newest first by `started_at` (as a time). */
export interface RunSummary {
  run_id: string
  artifact_id: string
  dataset_version: string
  started_at: string
  status: TrainingRunResult['status'] | null
}
