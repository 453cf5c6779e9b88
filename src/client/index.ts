import { parseRetryAfter, RetryableAnswer, retry } from '../llm/retry.ts'
import type { RolloutInput, TrainingMetadata } from '../schemas/rollout.ts'
import type { ScoreResult } from '../schemas/score.ts'
import type { RubricStatus } from '../schemas/status.ts'

export interface RewardClientOptions {
  /** e.g. `http://127.0.0.1:8787` or `https://reward-harness.example.workers.dev` */
  baseUrl: string
  /** A run token or the admin token; omit for the local default run. */
  token?: string
  /** Address a run by path (`/runs/:runId`) instead of by token. */
  runId?: string
  /** Per-request timeout; trainers' own budgets are minutes, so the default is 180 s. */
  timeoutMs?: number
  /**
   * Attempts for 429 / 503 / network failures, honouring Retry-After. A run budget's 429 (`*_budget_exceeded`) is the
   * run's limit, not the server's load: it is never retried.
   */
  maxAttempts?: number
  fetch?: typeof fetch
}

/** A non-2xx answer, with the server's machine-readable code. */
export class RewardHarnessError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly requestId?: string,
  ) {
    super(message)
    this.name = 'RewardHarnessError'
  }
}

export type RubricUpdated = RubricStatus & { waited_s_max: number; timed_out?: boolean }

const RETRYABLE_STATUS = new Set([429, 502, 503])
/** Backoff for 429 / 502 / 503 and network failures; a Retry-After wins, up to the cap. */
const CLIENT_RETRY = { baseDelayMs: 250, maxDelayMs: 10_000 }

/**
 * Whether a 429 is a run budget's refusal (`instance_budget_exceeded`, `update_budget_exceeded`,
 * `judge_budget_exceeded`), read from a copy of the body so the answer stays readable.
 * @example if (await isBudgetRefusal(response)) return response
 */
async function isBudgetRefusal(response: Response): Promise<boolean> {
  if (response.status !== 429) return false
  const payload = (await response
    .clone()
    .json()
    .catch(() => ({}))) as { error?: { code?: unknown } }
  const code = payload.error?.code
  return typeof code === 'string' && code.endsWith('_budget_exceeded')
}

/**
 * The TypeScript client of the edge scoring API, for Node and Workers alike.
 * @example
 * const client = new RewardClient({ baseUrl: 'http://127.0.0.1:8787' })
 * const { score } = await client.scoreAsync({ id: 'r1', input: 'What is 2+2?', output: '4' }, { high_level_goal:
 * 'math', model_size: '7B', current_step: 0, total_steps: 10 }) await client.rolloutsComplete()
 * await client.rubricUpdated()
 */
export class RewardClient {
  private readonly base: string
  private readonly fetchImpl: typeof fetch

  constructor(private readonly options: RewardClientOptions) {
    const root = options.baseUrl.replace(/\/+$/, '')
    this.base = options.runId ? `${root}/runs/${encodeURIComponent(options.runId)}` : root
    this.fetchImpl = options.fetch ?? ((input, init) => fetch(input, init))
  }

  /** Scores one rollout; in a sync-mode run this returns after the step's rubric update. */
  scoreAsync(rollout: RolloutInput, metadata: TrainingMetadata, instanceId?: string): Promise<ScoreResult> {
    return this.request('POST', '/score', { rollout, metadata, ...(instanceId ? { instance_id: instanceId } : {}) })
  }

  /** Tells the service the step's rollouts are all in (answers `noop` when the run closes steps by count). */
  rolloutsComplete(): Promise<{ status: 'complete' | 'noop'; step: number; closed: boolean }> {
    return this.request('POST', '/complete', {})
  }

  /**
   * Long-polls until every instance touched in the step has finished its update, or `timeoutS` passes
   * (then the answer has `timed_out: true`). Each poll is bounded by the server's maximum wait.
   */
  async rubricUpdated(timeoutS = 300): Promise<RubricUpdated> {
    const deadline = Date.now() + timeoutS * 1_000
    for (;;) {
      const remaining = Math.max(0, Math.ceil((deadline - Date.now()) / 1_000))
      const answer = await this.request<RubricUpdated>(
        'GET',
        `/rubric_status/wait?timeout_s=${remaining}`,
        undefined,
        (remaining + 30) * 1_000,
      )
      if (!answer.timed_out || Date.now() >= deadline) return answer
    }
  }

  rubricStatus(): Promise<RubricStatus> {
    return this.request('GET', '/rubric_status')
  }

  rubrics(instanceId?: string): Promise<Record<string, unknown>> {
    return this.request('GET', `/rubrics${instanceId ? `?instance_id=${encodeURIComponent(instanceId)}` : ''}`)
  }

  /** Every rubric version of an instance, with the updater's strategy, rationale and diff. */
  rubricHistory(instanceId?: string): Promise<{ versions: Record<string, unknown>[] }> {
    return this.request('GET', `/rubrics/history${instanceId ? `?instance_id=${encodeURIComponent(instanceId)}` : ''}`)
  }

  /** The run's long-term memory; `q` makes it a semantic search. */
  memory(
    filter: { kind?: string; step?: number; instance_id?: string; q?: string; limit?: number } = {},
  ): Promise<{ documents: Record<string, unknown>[] }> {
    const query = new URLSearchParams(
      Object.entries(filter).flatMap(([key, value]): [string, string][] =>
        value === undefined ? [] : [[key, String(value)]],
      ),
    )
    return this.request('GET', `/memory${query.size > 0 ? `?${query}` : ''}`)
  }

  private async request<T>(
    method: string,
    path: string,
    body?: unknown,
    timeoutMs = this.options.timeoutMs ?? 180_000,
  ): Promise<T> {
    const maxAttempts = this.options.maxAttempts ?? 4
    const send = async (attempt: number): Promise<Response> => {
      const response = await this.fetchImpl(`${this.base}${path}`, {
        method,
        headers: {
          accept: 'application/json',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...(this.options.token ? { authorization: `Bearer ${this.options.token}` } : {}),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(timeoutMs),
      })
      if (RETRYABLE_STATUS.has(response.status) && attempt < maxAttempts && !(await isBudgetRefusal(response))) {
        await response.body?.cancel()
        throw new RetryableAnswer(response.status, parseRetryAfter(response.headers.get('retry-after')))
      }
      return response
    }
    const verdict = (error: unknown) => ({
      error,
      retryable: true,
      retryAfterSeconds: error instanceof RetryableAnswer ? error.retryAfterSeconds : undefined,
    })
    const response = await retry(send, verdict, { ...CLIENT_RETRY, maxAttempts })
    if (response.ok) return (await response.json()) as T
    const payload = (await response.json().catch(() => ({}))) as {
      error?: { code?: string; message?: string }
      request_id?: string
    }
    throw new RewardHarnessError(
      response.status,
      payload.error?.code ?? 'http_error',
      payload.error?.message ?? `HTTP ${response.status}`,
      payload.request_id,
    )
  }
}
