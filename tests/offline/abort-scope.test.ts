/** abortScope (src/llm/abort.ts): one signal per LLM call, from the caller's signals and a deadline. */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { abortScope } from '../../src/llm/abort.ts'

describe('abortScope', () => {
  beforeEach(() => vi.useFakeTimers())
  afterEach(() => vi.useRealTimers())

  it('aborts with a TimeoutError once the deadline passes, and says it timed out', () => {
    const scope = abortScope([undefined], 1_000)
    vi.advanceTimersByTime(999)
    expect(scope.signal.aborted).toBe(false)
    vi.advanceTimersByTime(1)
    expect(scope.signal.aborted).toBe(true)
    expect((scope.signal.reason as DOMException).name).toBe('TimeoutError')
    expect(scope.timedOut()).toBe(true)
  })

  it("aborts with the first linked signal's reason, not as a timeout", () => {
    const run = new AbortController()
    const call = new AbortController()
    const scope = abortScope([run.signal, call.signal], 1_000)
    call.abort(new Error('the caller gave up'))
    run.abort(new Error('the run stopped'))
    expect((scope.signal.reason as Error).message).toBe('the caller gave up')
    expect(scope.timedOut()).toBe(false)
  })

  it('is the lone signal itself when there is no deadline to add', () => {
    const run = new AbortController()
    const scope = abortScope([undefined, run.signal])
    expect(scope.signal).toBe(run.signal)
    scope.release()
    run.abort(new Error('stopped'))
    expect((scope.signal.reason as Error).message).toBe('stopped')
    expect(scope.timedOut()).toBe(false)
  })

  it('starts aborted when a linked signal already is', () => {
    const scope = abortScope([AbortSignal.abort(new Error('stopped before'))], 1_000)
    expect((scope.signal.reason as Error).message).toBe('stopped before')
    expect(vi.getTimerCount()).toBe(0)
  })

  it('holds nothing once released: no timer, and a later abort of a linked signal does not reach it', () => {
    const run = new AbortController()
    const scope = abortScope([run.signal], 1_000)
    expect(vi.getTimerCount()).toBe(1)
    scope.release()
    expect(vi.getTimerCount()).toBe(0)
    run.abort()
    vi.advanceTimersByTime(5_000)
    expect(scope.signal.aborted).toBe(false)
  })
})
