/**
 * `/healthz` is liveness from the isolate alone: it touches neither D1 nor any Durable Object. The D1 round trip lives
 * at `/healthz/deep`, behind the admin token.
 */
import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import { createApp } from '../../workers/app.ts'
import type { Env } from '../../workers/env.ts'
import { ADMIN_TOKEN, answerOf, createRun, requestOf } from './helpers.ts'

/** The Worker's env with D1 counted: every `prepare`, `batch` and `exec` call. */
function countingDb(): { env: Env; calls: () => number } {
  let calls = 0
  const real = (env as unknown as Env).DB
  const DB = new Proxy(real, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver)
      if (typeof value !== 'function') return value
      return (...args: unknown[]) => {
        if (['prepare', 'batch', 'exec'].includes(String(property))) calls++
        return value.apply(target, args)
      }
    },
  })
  return { env: { ...(env as unknown as Env), DB }, calls: () => calls }
}

async function fetchWith(testEnv: Env, path: string, token?: string) {
  const ctx = createExecutionContext()
  const response = await createApp().fetch(requestOf('GET', path, token ? { token } : {}), testEnv, ctx)
  await waitOnExecutionContext(ctx)
  return answerOf(response)
}

describe('GET /healthz', () => {
  it('answers liveness without a single D1 call', async () => {
    const counted = countingDb()
    for (let i = 0; i < 5; i++) {
      const answer = await fetchWith(counted.env, '/healthz')
      expect(answer.status).toBe(200)
      expect(answer.json).toEqual({ status: 'ok', deployment: 'local' })
    }
    expect(counted.calls()).toBe(0)
  })

  it('/healthz/deep makes its D1 round trip for the admin only', async () => {
    const counted = countingDb()
    const deep = await fetchWith(counted.env, '/healthz/deep', ADMIN_TOKEN)
    expect(deep.status).toBe(200)
    expect(deep.json).toMatchObject({ status: 'ok', d1_ms: expect.any(Number) })
    expect(counted.calls()).toBe(1)
    expect((await fetchWith(counted.env, '/healthz/deep')).status).toBe(401)
    const run = await createRun({ anchor_rubrics: [{ text: 'Correct.' }] })
    expect((await fetchWith(counted.env, '/healthz/deep', run.token)).status).toBe(403)
  })
})
