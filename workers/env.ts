import type { LedgerShard } from '../durable-objects/ledger-shard/index.ts'
import type { MemoryIndex } from '../durable-objects/memory-index/index.ts'
import type { RubricInstance } from '../durable-objects/rubric-instance/index.ts'
import type { RunCoordinator } from '../durable-objects/run-coordinator/index.ts'
import type { RunConfig } from '../src/schemas/run-config.ts'
import type { WorkersAiBinding } from '../src/llm/workers-ai.ts'
import type { StepJob } from './queues/messages.ts'
import type { JudgeEntrypoint } from './scoring/judge-entrypoint.ts'

/** The Worker's bindings, vars and secrets (wrangler.toml; secrets via `wrangler secret put` or .dev.vars). */
export interface Env {
  DB: D1Database
  RUN_COORDINATOR: DurableObjectNamespace<RunCoordinator>
  RUBRIC_INSTANCE: DurableObjectNamespace<RubricInstance>
  LEDGER: DurableObjectNamespace<LedgerShard>
  MEMORY_INDEX: DurableObjectNamespace<MemoryIndex>
  STEP_QUEUE: Queue<StepJob>
  /** This Worker's own `JudgeEntrypoint` (a service binding): large batches hand their judgements out through it. */
  JUDGE?: Service<JudgeEntrypoint>
  /** Scored rollouts of runs whose config says `archive: true`, as NDJSON per run × step × ledger shard. */
  ARCHIVE?: R2Bucket
  /** Per-event telemetry (scores, LLM calls) in production; absent locally, where only the per-step aggregates are kept. */
  TELEMETRY?: AnalyticsEngineDataset
  /** Milliseconds a ledger shard collects before it reports to the run's coordinator (1000 unless set). */
  LEDGER_REPORT_MS?: string
  /** `local` (exact index in a Durable Object per run) or `vectorize` (the VECTORS binding). */
  VECTOR_BACKEND?: string
  /** `hashed` (deterministic local embedder) or `workers-ai`. */
  EMBEDDER?: string
  VECTORS?: VectorizeIndex
  /** Delay of a failed queue job's first retry, in seconds (default 2; doubles per attempt). */
  QUEUE_RETRY_BASE_S?: string
  /** `local` under `npm start`; anything else is treated as production. */
  DEPLOYMENT?: string
  /** Comma-separated secret names a run's or deployment's `api_key_env` may name (never the Worker's own secrets). */
  JUDGE_KEY_NAMES?: string
  /** The HMAC key of dashboard session cookies (a secret); without it, a key derived from ADMIN_TOKEN. */
  SESSION_SECRET?: string
  /** Bearer token for admin routes; a secret. */
  ADMIN_TOKEN?: string
  AI?: WorkersAiBinding
  /** A bearer token that may call `/rm/*` in production, besides the admin token; a secret. */
  RM_TOKEN?: string
  /** Per-caller request limits (workers/middleware/rate-limit.ts): run tokens and anonymous callers of `standard` runs. */
  RATE_LIMITER?: RateLimit
  /** The same for runs whose config says `"rate_limit": "high"`. */
  RATE_LIMITER_HIGH?: RateLimit
  /** The admin token's own limit, apart from every run. */
  ADMIN_RATE_LIMITER?: RateLimit
  /** The bindings' period in seconds (10 unless set), for `Retry-After`. */
  RATE_LIMIT_PERIOD_S?: string
  /** The OpenAI-compatible endpoint of openai-backend artifacts whose deployment names none. */
  RM_LLM_BASE_URL?: string
  /** That endpoint's API key (a secret), unless the deployment names its own `api_key_env`. */
  RM_LLM_API_KEY?: string
}

/** Hono's generic for this app: typed bindings and the per-request variables middleware sets. */
export interface AppEnv {
  Bindings: Env
  Variables: {
    requestId: string
    /** Set by the auth middleware: who is calling. */
    principal: Principal
    /** Set by the run middleware: the run this request addresses. */
    run: { id: string; config: RunConfig }
  }
}

/**
 * Who is calling; a presented token's SHA-256 (all D1 stores of a run token) rides along so no later step hashes it
 * again. The RM token is anonymous but for `/rm/*`: `rmTokenHash` is set for it.
 */
export type Principal =
  | { kind: 'admin' }
  | { kind: 'run'; runId: string; tokenHash: string }
  | { kind: 'anonymous'; rmTokenHash?: string }
