import type { RunConfig } from '../src/schemas/run-config.ts'

/**
 * The Worker's bindings and vars as `npm run types` (`wrangler types`) generates them from wrangler.toml into
 * worker-configuration.d.ts, with the secrets and tuning vars below that wrangler.toml does not name.
 */
export type Env = Cloudflare.Env

declare global {
  namespace Cloudflare {
    interface Env {
      /** Milliseconds a ledger shard collects before it reports to the run's coordinator (1000 unless set). */
      LEDGER_REPORT_MS?: string
      /** Delay of a failed queue job's first retry, in seconds (default 2; doubles per attempt). */
      QUEUE_RETRY_BASE_S?: string
      /** Seconds between a running step job's "still working" notes to its coordinator (60 unless set). */
      STEP_HEARTBEAT_S?: string
      /** The HMAC key of dashboard session cookies (a secret); without it, a key derived from ADMIN_TOKEN. */
      SESSION_SECRET?: string
      /** Bearer token for admin routes; a secret. */
      ADMIN_TOKEN?: string
      /** A bearer token that may call `/rm/*` in production, besides the admin token; a secret. */
      RM_TOKEN?: string
      /**
       * Bytes of a body refused as too large (413) that the Worker still reads and drops before answering, where no
       * runtime in front takes it in (`npm run serve` sets it): unset, only small bodies are drained.
       */
      DRAIN_REFUSED_BODY_BYTES?: string
      /** The bindings' period in seconds (10 unless set), for `Retry-After`. */
      RATE_LIMIT_PERIOD_S?: string
      /**
       * Outside `DEPLOYMENT=local`: the judge and embedder hosts the Worker may send its keys to, comma-separated
       * `host`, `host:port` or `*.domain`. Unset: any public host; an internal address only when listed.
       */
      LLM_HOST_ALLOWLIST?: string
      /** The OpenAI-compatible endpoint of openai-backend artifacts whose deployment names none. */
      RM_LLM_BASE_URL?: string
      /** That endpoint's API key (a secret), unless the deployment names its own `api_key_env`. */
      RM_LLM_API_KEY?: string
      /** `EMBEDDER=openai`: the OpenAI-compatible API up to its version segment, e.g. `https://api.openai.com/v1`. */
      EMBEDDINGS_BASE_URL?: string
      /** `EMBEDDER=openai`: the embedding model, e.g. `text-embedding-3-small`. */
      EMBEDDINGS_MODEL?: string
      /** `EMBEDDER=openai`: the model's vector length; the vector index must have the same. */
      EMBEDDINGS_DIMENSIONS?: string
      /** `EMBEDDER=openai`: "true" asks the server to shorten vectors to the dimensions (text-embedding-3-*). */
      EMBEDDINGS_REQUEST_DIMENSIONS?: string
      /** `EMBEDDER=openai`: the API key, sent as a bearer token (a secret); local servers usually need none. */
      EMBEDDINGS_API_KEY?: string
    }
  }
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
    /** Set by `leaveBodyUnread` on a route whose body is never read, not even drained after the answer. */
    leaveBodyUnread?: true
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
