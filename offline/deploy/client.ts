/**
 * The edge's admin API for artifacts and deployments (Bearer admin token), and its RM surface:
 *
 *   POST /admin/artifacts                        RmArtifact → 201 {artifact_id, stored: true} | 200 {…, stored: false}
 *   POST /admin/targets/:target/deployments      {artifact_id, deployed_by?, llm?} → 201 DeployRecord
 *   POST /admin/targets/:target/rollback         {deployed_by?} → 201 DeployRecord | 409 nothing_to_roll_back
 *   GET  /admin/targets/:target/deployments      → {target, active_artifact_id, deployments: [DeployRecord…] newest
 * first}
 *   GET  /rm/:target/healthz                     → {status, artifact_id, source_session_id, schema_version,
 * rm_api_version}
 *
 * Only 429 and 503 are retried (exponential backoff with full jitter, `Retry-After` honoured up to a cap): both
 * mean the request was not acted on. Any other answer is final; a network failure or timeout is never retried (a
 * deployment is not idempotent). Errors: EdgeHttpError (the edge answered non-2xx), EdgeNetworkError (no answer),
 * EdgeProtocolError (a 2xx whose body is not what the contract says).
 */
import { z } from 'zod'
import type { StructuredOutput } from '../../src/schemas/structured-output.ts'
import { parseRetryAfter, RetryableAnswer, retry, type RetryPolicy } from '../../src/llm/retry.ts'
import { DeployRecord, type AnyRmArtifact } from '../../src/schemas/artifact.ts'
import { networkReason } from '../edge/index.ts'
import { EdgeHttpError, EdgeNetworkError, EdgeProtocolError } from './errors.ts'

/** What `POST /admin/artifacts` answers. */
export const UploadResult = z.object({ artifact_id: z.string(), stored: z.boolean() })
export type UploadResult = z.infer<typeof UploadResult>

/** What `GET /admin/targets/:target/deployments` answers. */
export const DeploymentList = z.object({
  target: z.string(),
  active_artifact_id: z.string().nullable(),
  deployments: z.array(DeployRecord),
})
export type DeploymentList = z.infer<typeof DeploymentList>

/** What `GET /rm/:target/healthz` answers. */
export const RmHealth = z.looseObject({
  status: z.string(),
  artifact_id: z.string(),
  source_session_id: z.string(),
  schema_version: z.string(),
  rm_api_version: z.string(),
})
export type RmHealth = z.infer<typeof RmHealth>

/** The LLM a target scores with (openai-backend artifacts): the key is named, never sent. */
export interface DeployLlm {
  base_url: string
  model?: string
  api_key_env?: string
  structured_output?: StructuredOutput
}

/**
 * How 429/503 answers are retried.
 * @internal
 */
export const DEFAULT_RETRY: RetryPolicy = { maxAttempts: 5, baseDelayMs: 500, maxDelayMs: 8_000 }
const DEFAULT_TIMEOUT_MS = 30_000

export interface AdminClientOptions {
  /** The edge's base URL, e.g. `https://rm.example.com` (a trailing slash is ignored). */
  baseUrl: string
  /** The admin token (Bearer). */
  token: string
  timeoutMs?: number
  retry?: Partial<Pick<RetryPolicy, 'maxAttempts' | 'baseDelayMs' | 'maxDelayMs'>>
  /** For tests: the fetch to use and how to wait. */
  fetch?: typeof fetch
  sleep?: (ms: number) => Promise<void>
  /** Called before each retry (e.g. to print a note). */
  onRetry?: (info: { method: string; path: string; status: number; attempt: number; waitMs: number }) => void
}

/**
 * The admin API client.
 * @example
 * const client = new AdminClient({ baseUrl: 'http://127.0.0.1:8787', token: process.env.REWARD_HARNESS_ADMIN_TOKEN! })
 * await client.uploadArtifact(artifact)
 * const record = await client.deploy('prod', { artifact_id: artifact.artifact_id, deployed_by: 'ci' })
 */
export class AdminClient {
  readonly baseUrl: string
  private readonly retry: RetryPolicy
  private readonly fetchImpl: typeof fetch
  private readonly sleep: (ms: number) => Promise<void>

  /** @example new AdminClient({ baseUrl: 'http://127.0.0.1:8787/', token: 't' }).baseUrl // 'http://127.0.0.1:8787' */
  constructor(private readonly options: AdminClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '')
    this.retry = { ...DEFAULT_RETRY, ...options.retry }
    this.fetchImpl = options.fetch ?? fetch
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)))
  }

  /**
   * Uploads an artifact; `stored` is false when the edge already had it (same content, same id).
   * @example const { stored } = await client.uploadArtifact(artifact)
   */
  async uploadArtifact(artifact: AnyRmArtifact): Promise<UploadResult> {
    const result = await this.call('POST', '/admin/artifacts', UploadResult, artifact)
    if (result.artifact_id !== artifact.artifact_id)
      throw new EdgeProtocolError(
        'POST',
        '/admin/artifacts',
        `the edge stored ${result.artifact_id}, not ${artifact.artifact_id}`,
      )
    return result
  }

  /**
   * Activates an uploaded artifact on a target.
   * @example await client.deploy('prod', { artifact_id: 'rm_…', deployed_by: 'ci', llm: { base_url:
   *   'https://api.openai.com/v1', model: 'gpt-4o-mini', api_key_env: 'OPENAI_API_KEY' } })
   */
  deploy(
    target: string,
    request: { artifact_id: string; deployed_by?: string; llm?: DeployLlm },
  ): Promise<DeployRecord> {
    return this.call('POST', `/admin/targets/${encodeURIComponent(target)}/deployments`, DeployRecord, request)
  }

  /**
   * Re-activates the artifact the target's active deployment replaced (EdgeHttpError 409 `nothing_to_roll_back` when
   * none).
   * @example const record = await client.rollback('prod', { deployed_by: 'oncall' }) // record.action === 'rollback'
   */
  rollback(target: string, request: { deployed_by?: string } = {}): Promise<DeployRecord> {
    return this.call('POST', `/admin/targets/${encodeURIComponent(target)}/rollback`, DeployRecord, request)
  }

  /**
   * A target's deployment history, newest first, and its active artifact.
   * @example (await client.deployments('prod')).active_artifact_id
   */
  deployments(target: string): Promise<DeploymentList> {
    return this.call('GET', `/admin/targets/${encodeURIComponent(target)}/deployments`, DeploymentList)
  }

  /**
   * The RM surface's health of a target (no token needed; sent anyway).
   * @example (await client.health('prod')).artifact_id
   */
  health(target: string): Promise<RmHealth> {
    return this.call('GET', `/rm/${encodeURIComponent(target)}/healthz`, RmHealth)
  }

  private async call<T>(method: 'GET' | 'POST', path: string, schema: z.ZodType<T>, body?: unknown): Promise<T> {
    const url = `${this.baseUrl}${path}`
    const payload = body === undefined ? undefined : JSON.stringify(body)
    const timeoutMs = this.options.timeoutMs ?? DEFAULT_TIMEOUT_MS
    const send = async (attempt: number): Promise<{ response: Response; text: string }> => {
      let response: Response
      let text: string
      try {
        response = await this.fetchImpl(url, {
          method,
          headers: {
            accept: 'application/json',
            authorization: `Bearer ${this.options.token}`,
            ...(payload === undefined ? {} : { 'content-type': 'application/json' }),
          },
          ...(payload === undefined ? {} : { body: payload }),
          signal: AbortSignal.timeout(timeoutMs),
        })
        text = await response.text()
      } catch (error) {
        throw new EdgeNetworkError(method, path, networkReason(error, timeoutMs), this.baseUrl)
      }
      if ((response.status === 429 || response.status === 503) && attempt < this.retry.maxAttempts)
        throw new RetryableAnswer(response.status, parseRetryAfter(response.headers.get('retry-after')))
      return { response, text }
    }
    const { response, text } = await retry(
      send,
      (error) => ({
        error: error as Error,
        retryable: error instanceof RetryableAnswer,
        retryAfterSeconds: error instanceof RetryableAnswer ? error.retryAfterSeconds : undefined,
      }),
      {
        maxAttempts: this.retry.maxAttempts,
        baseDelayMs: this.retry.baseDelayMs,
        maxDelayMs: this.retry.maxDelayMs,
        sleep: this.sleep,
        onRetry: (error, attempt, delayMs) =>
          this.options.onRetry?.({
            method,
            path,
            status: (error as RetryableAnswer).status,
            attempt,
            waitMs: Math.round(delayMs),
          }),
      },
    )
    const json = parseJson(text)
    if (!response.ok) {
      const error = isRecord(json) && isRecord(json.error) ? json.error : {}
      const code = typeof error.code === 'string' ? error.code : `http_${response.status}`
      const message =
        typeof error.message === 'string' ? error.message : text.trim().slice(0, 300) || response.statusText
      throw new EdgeHttpError(method, path, response.status, code, message, error.details)
    }
    if (json === undefined)
      throw new EdgeProtocolError(
        method,
        path,
        `${response.status} with a body that is not JSON: ${text.trim().slice(0, 200)}`,
      )
    const parsed = schema.safeParse(json)
    if (!parsed.success)
      throw new EdgeProtocolError(
        method,
        path,
        parsed.error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`).join('; '),
      )
    return parsed.data
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown
  } catch {
    return undefined
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
