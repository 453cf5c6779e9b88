import { LlmError } from './types.ts'

export interface RetryPolicy {
  maxAttempts: number
  baseDelayMs: number
  maxDelayMs: number
  /** Called before each wait; lets callers log and count every failed attempt. */
  onRetry?: (error: LlmError, attempt: number, delayMs: number) => void
  sleep?: (ms: number) => Promise<void>
}

const DEFAULT_POLICY: RetryPolicy = { maxAttempts: 4, baseDelayMs: 250, maxDelayMs: 8_000 }

/**
 * Runs `attempt` until it succeeds, retrying retryable `LlmError`s with exponential backoff and full jitter.
 * A server's Retry-After wins over the computed delay (capped at `maxDelayMs`).
 * @example const reply = await withRetry(() => model.complete(request), { maxAttempts: 3 })
 */
export async function withRetry<T>(
  attempt: (attemptNumber: number) => Promise<T>,
  policy: Partial<RetryPolicy> = {},
): Promise<T> {
  const { maxAttempts, baseDelayMs, maxDelayMs, onRetry, sleep = defaultSleep } = { ...DEFAULT_POLICY, ...policy }
  for (let attemptNumber = 1; ; attemptNumber++) {
    try {
      return await attempt(attemptNumber)
    } catch (error) {
      const failure =
        error instanceof LlmError ? error : new LlmError('network', String((error as Error)?.message ?? error))
      if (!failure.retryable || attemptNumber >= maxAttempts) throw failure
      const backoff = Math.random() * Math.min(maxDelayMs, baseDelayMs * 2 ** (attemptNumber - 1))
      const delayMs =
        failure.retryAfterSeconds === undefined ? backoff : Math.min(maxDelayMs, failure.retryAfterSeconds * 1_000)
      onRetry?.(failure, attemptNumber, delayMs)
      await sleep(delayMs)
    }
  }
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

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
