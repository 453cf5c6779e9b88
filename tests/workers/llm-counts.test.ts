/**
 * LLM calls counted where they happen (issue 37 item 4): the calls a scoring request made reach the run's coordinator
 * from the Worker, summed per isolate and flushed on the request's `waitUntil`, not through the ledger's step
 * protocol. Each test waits on the request's execution context (the flush is part of it), not on time.
 */
import { env } from 'cloudflare:workers'
import { afterEach, describe, expect, it } from 'vitest'
import { callApp, clearFakeEndpoints, createRun, fakeEndpoint, fakeRole, METADATA, rollout } from './helpers.ts'

const RUBRICS = { anchor_rubrics: [{ text: 'The final answer is correct.' }] }

/** The run's scorer calls by outcome, as `GET /llm_calls` sums them. */
async function scorerCalls(token: string): Promise<Record<string, number>> {
  const { json } = await callApp('GET', '/llm_calls', { token })
  const byOutcome: Record<string, number> = {}
  for (const group of json.calls.filter((group: { role: string }) => group.role === 'scorer'))
    byOutcome[group.outcome] = (byOutcome[group.outcome] ?? 0) + group.calls
  return byOutcome
}

afterEach(() => clearFakeEndpoints())

describe('LLM calls of a scoring request', () => {
  it("counts the scorer's calls of a /score in /llm_calls, a failed judgement's included", async () => {
    const endpoint = fakeEndpoint('llm-counts-down', async () => new Response('down', { status: 500 }))
    const run = await createRun({ ...RUBRICS, agents: { scorer: fakeRole('llm-counts-down') } })
    const res = await callApp('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('counted-1'), metadata: METADATA },
    })
    expect(res.json.error.code).toBe('llm_unavailable')
    expect(endpoint.calls()).toBeGreaterThan(0)
    const counted = await scorerCalls(run.token)
    expect(Object.values(counted).reduce((sum, calls) => sum + calls, 0)).toBe(endpoint.calls())
    expect(counted.ok ?? 0).toBe(0)
  })

  it('keeps the counts of a flush that failed, and hands them over with the next', async () => {
    const endpoint = fakeEndpoint('llm-counts-flaky', async () => new Response('down', { status: 500 }))
    const run = await createRun({ ...RUBRICS, agents: { scorer: fakeRole('llm-counts-flaky') } })
    const unreachable = {
      ...env,
      RUN_COORDINATOR: {
        getByName: () => ({ addLlmCalls: () => Promise.reject(new Error('the coordinator is unreachable')) }),
      },
    }
    await callApp('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('kept-1'), metadata: METADATA },
      env: unreachable,
    })
    const first = endpoint.calls()
    expect(first).toBeGreaterThan(0)
    expect(await scorerCalls(run.token)).toEqual({})
    await callApp('POST', '/score', { token: run.token, body: { rollout: rollout('kept-2'), metadata: METADATA } })
    expect(endpoint.calls()).toBeGreaterThan(first)
    const counted = await scorerCalls(run.token)
    expect(Object.values(counted).reduce((sum, calls) => sum + calls, 0)).toBe(endpoint.calls())
  })
})

/** The Worker's env with its coordinators' `addLlmCalls` wrapped by `wrap` (the real call is `real`). */
function withAddLlmCalls(wrap: (real: () => Promise<void>, attempt: number) => Promise<void>) {
  let attempts = 0
  return {
    ...env,
    RUN_COORDINATOR: {
      getByName: (name: string) => {
        const stub = env.RUN_COORDINATOR.getByName(name)
        return new Proxy(stub, {
          get: (target, property) =>
            property === 'addLlmCalls'
              ? (...args: Parameters<typeof stub.addLlmCalls>) => wrap(() => target.addLlmCalls(...args), ++attempts)
              : Reflect.get(target, property),
        })
      },
    },
  }
}

describe('LLM call counts handed to the coordinator', () => {
  it('are counted once when a batch is sent again after a reset lost the reply', async () => {
    const endpoint = fakeEndpoint('llm-counts-twice', async () => new Response('down', { status: 500 }))
    const run = await createRun({ ...RUBRICS, agents: { scorer: fakeRole('llm-counts-twice') } })
    // The first send lands, then its reply is lost to a reset: callObject sends the same batch again.
    const lostReply = withAddLlmCalls(async (real, attempt) => {
      await real()
      if (attempt === 1) throw Object.assign(new Error('the object was reset'), { durableObjectReset: true })
    })
    await callApp('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('twice-1'), metadata: METADATA },
      env: lostReply,
    })
    const counted = await scorerCalls(run.token)
    expect(Object.values(counted).reduce((sum, calls) => sum + calls, 0)).toBe(endpoint.calls())
  })

  it('are sent again on a timer when a send fails, with no request after it', async () => {
    const endpoint = fakeEndpoint('llm-counts-timer', async () => new Response('down', { status: 500 }))
    const run = await createRun({ ...RUBRICS, agents: { scorer: fakeRole('llm-counts-timer') } })
    const failsOnce = withAddLlmCalls(async (real, attempt) => {
      if (attempt === 1) throw new Error('the coordinator is unreachable')
      await real()
    })
    await callApp('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('timer-1'), metadata: METADATA },
      env: failsOnce,
    })
    const counted = await scorerCalls(run.token)
    expect(Object.values(counted).reduce((sum, calls) => sum + calls, 0)).toBe(endpoint.calls())
  })
})

describe('a rollout over the judge model context window', () => {
  it('is a 413 naming the limit after one call, never retried and never a score', async () => {
    const endpoint = fakeEndpoint('llm-counts-context', async () =>
      Response.json(
        {
          error: {
            message:
              "This model's maximum context length is 8192 tokens. However, you requested 9036 tokens (9031 in the " +
              'messages, 5 in the completion). Please reduce the length of the messages or completion.',
            type: 'invalid_request_error',
            param: 'messages',
            code: 'context_length_exceeded',
          },
        },
        { status: 400 },
      ),
    )
    const run = await createRun({
      ...RUBRICS,
      agents: { scorer: { ...fakeRole('llm-counts-context'), max_attempts: 4 } },
    })
    const res = await callApp('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('too-long-1'), metadata: METADATA },
    })
    expect(res.status).toBe(413)
    expect(res.json.error).toMatchObject({ code: 'context_length_exceeded', details: { context_limit: 8192 } })
    expect(res.json.error.message).toContain('8192 tokens')
    expect(res.json).not.toHaveProperty('score')
    expect(endpoint.calls()).toBe(1)
    expect(await scorerCalls(run.token)).toEqual({ context_length: 1 })
  })
})
