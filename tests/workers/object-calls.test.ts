/**
 * Every route reaches its Durable Objects one way (`objects.*` in workers/objects/call.ts): an overloaded object is a
 * 503 `overloaded` with Retry-After, and an object reset under the call (a deploy, an eviction) is called again on a
 * fresh stub, so the client gets its answer. One route of each kind of object call, each driven through the app with
 * its namespace made to fail the first call.
 */
import { createExecutionContext } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import { createApp } from '../../workers/app.ts'
import type { Env } from '../../workers/env.ts'
import { ADMIN_TOKEN, METADATA, answerOf, createRun, requestOf, rollout } from './helpers.ts'

const RUBRICS = { anchor_rubrics: [{ id: 'a-correct', text: 'The final answer is correct.' }] }

type Namespace = 'LEDGER' | 'RUN_COORDINATOR' | 'RUBRIC_INSTANCE'
type Fault = 'overload' | 'reset'

const FAULTS: Record<Fault, () => Error> = {
  overload: () =>
    Object.assign(new Error('Durable Object is overloaded. Too many requests queued.'), { overloaded: true }),
  reset: () =>
    Object.assign(new Error('Durable Object reset because its code was updated.'), { durableObjectReset: true }),
}

/** Stub properties that are not RPC calls. */
const NOT_CALLS = new Set(['then', 'id', 'name', 'fetch', 'connect'])

/** `env` with one namespace whose first RPC call throws `fault`; counts the calls that reached the namespace. */
function failingOnce(namespace: Namespace, fault: Fault) {
  let failures = 1
  let calls = 0
  const real = env[namespace] as unknown as DurableObjectNamespace
  const proxied = new Proxy(real, {
    get(target, property, receiver) {
      if (property !== 'getByName') return Reflect.get(target, property, receiver)
      return (name: string) =>
        new Proxy(target.getByName(name), {
          get(stub, method, stubReceiver) {
            const value = Reflect.get(stub, method, stubReceiver)
            if (typeof method !== 'string' || NOT_CALLS.has(method)) return value
            return (...args: unknown[]) => {
              calls++
              if (failures > 0) {
                failures--
                return Promise.reject(FAULTS[fault]())
              }
              return (value as (...a: unknown[]) => unknown)(...args)
            }
          },
        })
    },
  })
  return { env: { ...env, [namespace]: proxied } as Env, calls: () => calls }
}

const ROUTES: { name: string; namespace: Namespace; method: string; path: string; body?: unknown }[] = [
  {
    name: 'POST /score',
    namespace: 'LEDGER',
    method: 'POST',
    path: '/score',
    body: { rollout: rollout('oc-1'), metadata: METADATA },
  },
  {
    name: 'POST /score/batch',
    namespace: 'LEDGER',
    method: 'POST',
    path: '/score/batch',
    body: { items: [{ rollout: rollout('oc-2'), metadata: METADATA }] },
  },
  { name: 'POST /complete', namespace: 'RUN_COORDINATOR', method: 'POST', path: '/complete' },
  { name: 'GET /rubric_status', namespace: 'RUN_COORDINATOR', method: 'GET', path: '/rubric_status' },
  {
    name: 'GET /rubric_status/wait',
    namespace: 'RUN_COORDINATOR',
    method: 'GET',
    path: '/rubric_status/wait?timeout_s=0',
  },
  { name: 'GET /llm_calls', namespace: 'RUN_COORDINATOR', method: 'GET', path: '/llm_calls' },
  { name: 'GET /rubrics', namespace: 'RUBRIC_INSTANCE', method: 'GET', path: '/rubrics' },
  { name: 'GET /rubrics/history', namespace: 'RUBRIC_INSTANCE', method: 'GET', path: '/rubrics/history' },
  { name: 'GET /rubrics/stats', namespace: 'RUBRIC_INSTANCE', method: 'GET', path: '/rubrics/stats' },
  { name: 'the dashboard', namespace: 'RUN_COORDINATOR', method: 'GET', path: '/dashboard/runs/{run}' },
]

describe.each(ROUTES)('$name', ({ namespace, method, path, body }) => {
  async function send(fault: Fault) {
    const run = await createRun(RUBRICS)
    const patched = failingOnce(namespace, fault)
    const dashboard = path.startsWith('/dashboard')
    const request = requestOf(method, path.replace('{run}', run.runId), {
      ...(body === undefined ? {} : { body }),
      token: dashboard ? ADMIN_TOKEN : run.token,
    })
    const answer = await answerOf(await createApp().fetch(request, patched.env, createExecutionContext()))
    return { answer, calls: patched.calls() }
  }

  it('answers an overloaded object with 503 overloaded and Retry-After', async () => {
    const { answer } = await send('overload')
    if (path === '/score/batch') {
      // A batch answers per item: the item the ledger could not take says so, and the client sends it again.
      expect(answer.status, answer.text).toBe(200)
      expect(answer.json.results[0].error.code).toBe('overloaded')
      return
    }
    expect(answer.status, answer.text).toBe(503)
    expect(answer.headers.get('retry-after')).toBe('1')
    if (!path.startsWith('/dashboard')) expect(answer.json.error.code, answer.text).toBe('overloaded')
  })

  it('calls an object reset under the call again, on a fresh stub, and answers', async () => {
    const { answer, calls } = await send('reset')
    expect(answer.status, answer.text).toBe(200)
    expect(calls).toBeGreaterThanOrEqual(2)
  })
})
