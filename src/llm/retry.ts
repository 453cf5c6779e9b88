/**
 * The one retry loop of the project, on `p-retry`: exponential backoff with full jitter, a server's Retry-After
 * honoured up to the policy's cap, and the caller deciding which failures are worth another attempt. Bundle-friendly
 * (no node: imports): the published client uses it too.
 */
import pRetry, { AbortError } from 'p-retry'
import { LlmError } from './types.ts'

/** How often and how long to retry; every caller's knobs have these names. */
export interface RetryPolicy<E = LlmError> {
  /** Attempts in all, the first included (1 = no retry). */
  maxAttempts: number
  /** The ceiling of the first wait; doubled per retry, the wait itself drawn uniformly below it. */
  baseDelayMs: number
  /** The longest wait, a server's Retry-After included. */
  maxDelayMs: number
  /** Called before each wait; lets callers log and count every failed attempt. */
  onRetry?: (error: E, attempt: number, delayMs: number) => void
  /** Waits between attempts (tests pass a fake); must reject when `signal` aborts. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>
  /** Aborts the wait between attempts. */
  signal?: AbortSignal
  /** The jitter's source of randomness, in [0, 1). */
  random?: () => number
}

/** What a caller makes of one failed attempt. */
export interface RetryVerdict<E> {
  /** What is thrown when this failure ends the loop, and what `onRetry` sees. */
  error: E
  retryable: boolean
  /** The server's own wait, which wins over the computed backoff. */
  retryAfterSeconds?: number | undefined
  /** A wait the caller has already decided (0 = go again at once); skips the backoff. */
  delayMs?: number
}

const DEFAULT_RETRY_POLICY: RetryPolicy = { maxAttempts: 4, baseDelayMs: 250, maxDelayMs: 8_000 }

/**
 * Runs `attempt` until it succeeds, `judge` calls a failure final, or the attempts are spent; then throws that
 * last failure's `error`.
 * @example
 * const answer = await retry(() => fetch(url), (error) => ({ error, retryable: true }), { maxAttempts: 3 })
 */
export function retry<T, E>(
  attempt: (attemptNumber: number) => Promise<T>,
  judge: (error: unknown, attemptNumber: number) => RetryVerdict<E>,
  policy: Partial<RetryPolicy<E>> = {},
): Promise<T> {
  const { maxAttempts = DEFAULT_RETRY_POLICY.maxAttempts, onRetry, sleep = defaultSleep, signal } = policy
  const run = pRetry(
    async (attemptNumber) => {
      try {
        return await attempt(attemptNumber)
      } catch (caught) {
        const verdict = judge(caught, attemptNumber)
        if (!verdict.retryable || attemptNumber >= maxAttempts) throw new AbortError(new Final(verdict.error))
        throw new RetryNeeded(verdict, attemptNumber)
      }
    },
    {
      retries: Math.max(0, maxAttempts - 1),
      minTimeout: 0,
      maxTimeout: 0,
      randomize: false,
      onFailedAttempt: async (failure) => {
        const { verdict, attempt } = failure as unknown as RetryNeeded<E>
        const delayMs = verdict.delayMs ?? retryDelayMs(attempt, policy, verdict.retryAfterSeconds)
        try {
          onRetry?.(verdict.error, attempt, delayMs)
          if (delayMs > 0) await sleep(delayMs, signal)
        } catch (error) {
          throw new Final(error)
        }
      },
    },
  )
  return run.catch((error: unknown) => {
    throw error instanceof Final ? error.value : error
  })
}

/**
 * Runs `attempt` until it succeeds, retrying retryable `LlmError`s (anything else counts as a network failure).
 * @example const reply = await withRetry(() => model.complete(request), { maxAttempts: 3 })
 */
export function withRetry<T>(
  attempt: (attemptNumber: number) => Promise<T>,
  policy: Partial<RetryPolicy> = {},
): Promise<T> {
  return retry(attempt, judgeLlmError, policy)
}

/**
 * The wait before retry `attempt` (1-based): uniform in [0, min(maxDelayMs, baseDelayMs·2^(attempt−1))), or the
 * server's Retry-After when it sent one, never more than `maxDelayMs`.
 * @example retryDelayMs(1, { baseDelayMs: 500, maxDelayMs: 8_000 }, 2) // 2000
 */
export function retryDelayMs(
  attempt: number,
  policy: Partial<Pick<RetryPolicy, 'baseDelayMs' | 'maxDelayMs' | 'random'>> = {},
  retryAfterSeconds?: number,
): number {
  const { baseDelayMs, maxDelayMs } = { ...DEFAULT_RETRY_POLICY, ...policy }
  const random = policy.random ?? Math.random
  if (retryAfterSeconds !== undefined) return Math.min(maxDelayMs, Math.max(0, retryAfterSeconds * 1_000))
  return random() * Math.min(maxDelayMs, baseDelayMs * 2 ** (attempt - 1))
}

/**
 * Reads a Retry-After header: delta seconds or an HTTP date.
 * @example parseRetryAfter('2') // 2
 */
export function parseRetryAfter(value: string | null | undefined, now = Date.now()): number | undefined {
  if (!value) return undefined
  const seconds = Number(value)
  if (Number.isFinite(seconds)) return Math.max(0, seconds)
  const date = Date.parse(value)
  return Number.isNaN(date) ? undefined : Math.max(0, (date - now) / 1_000)
}

/**
 * An answer that asks to be tried again (429, 503…), as a throwable for {@link retry}'s `attempt`.
 * @example throw new RetryableAnswer(503, parseRetryAfter(response.headers.get('retry-after')))
 */
export class RetryableAnswer extends Error {
  override name = 'RetryableAnswer'
  /** @example new RetryableAnswer(429, 2).retryAfterSeconds // 2 */
  constructor(
    readonly status: number,
    readonly retryAfterSeconds?: number,
  ) {
    super(`HTTP ${status}`)
  }
}

function judgeLlmError(error: unknown): RetryVerdict<LlmError> {
  const failure =
    error instanceof LlmError ? error : new LlmError('network', String((error as Error)?.message ?? error))
  return { error: failure, retryable: failure.retryable, retryAfterSeconds: failure.retryAfterSeconds }
}

/** Carries a retryable verdict through p-retry to the wait; never escapes {@link retry}. */
class RetryNeeded<E> extends Error {
  constructor(
    readonly verdict: RetryVerdict<E>,
    readonly attempt: number,
  ) {
    super('retry needed')
  }
}

/**
 * Carries what ends the loop through p-retry untouched: p-retry only passes on `Error`s, and writes its attempt
 * counts onto the error it rejects with.
 */
class Final extends Error {
  constructor(readonly value: unknown) {
    super('final failure')
  }
}

const defaultSleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason)
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', abort)
      resolve()
    }, ms)
    const abort = () => {
      clearTimeout(timer)
      reject(signal?.reason)
    }
    signal?.addEventListener('abort', abort, { once: true })
  })
