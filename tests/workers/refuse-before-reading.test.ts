/**
 * Refuse before reading (issue 31 item 4), in workerd: a request without a credential, with a wrong one, or with one
 * valid for something else is refused without the Worker pulling a byte of its body past MAX_DRAINED_BYTES (a body up
 * to that size is read after the answer is decided, so a keep-alive client keeps its connection); `POST /healthz`
 * reads nothing. Each body is a stream that counts the bytes pulled from it.
 */
import { env } from 'cloudflare:workers'
import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import { createApp } from '../../workers/app.ts'
import { MAX_DRAINED_BYTES } from '../../workers/middleware/body-limit.ts'
import { ADMIN_TOKEN, createRun } from './helpers.ts'

const app = createApp()
const MIB = 1024 * 1024
const CHUNK = 64 * 1024
const production = { ...env, DEPLOYMENT: 'production', RM_TOKEN: 'test-rm-token' }

/** A body of `size` bytes of `{`-free filler that counts what is pulled from it; nothing is made before a pull. */
function countedBody(size: number) {
  const pulled = { bytes: 0 }
  const stream = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        const length = Math.min(CHUNK, size - pulled.bytes)
        if (length <= 0) return controller.close()
        pulled.bytes += length
        controller.enqueue(new Uint8Array(length).fill(0x20))
      },
    },
    { highWaterMark: 0 },
  )
  return { stream, pulled }
}

async function post(path: string, size: number, headers: Record<string, string> = {}, bindings: object = production) {
  const { stream, pulled } = countedBody(size)
  const ctx = createExecutionContext()
  const response = await app.fetch(
    new Request(`http://worker.test${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': String(size), ...headers },
      body: stream,
    }),
    bindings,
    ctx,
  )
  const text = await response.text()
  await waitOnExecutionContext(ctx)
  return { status: response.status, text, pulled: pulled.bytes }
}

describe('refuse before reading', () => {
  it('8 concurrent anonymous 16 MiB bodies are refused (401) with none of their bytes read', async () => {
    const answers = await Promise.all(Array.from({ length: 8 }, () => post('/score/batch', 16 * MIB)))
    for (const answer of answers) {
      expect(answer.status, answer.text).toBe(401)
      expect(answer.pulled).toBe(0)
    }
  })

  it('refuses unread: no token, a wrong token, a token for something else, on every kind of route', async () => {
    const run = await createRun({ anchor_rubrics: [{ text: 'Correct.' }] })
    const wrong = { authorization: 'Bearer rh_not-a-token-at-all' }
    const cases: [string, Record<string, string>, number][] = [
      ['/score', {}, 401],
      ['/compat/openrlhf', {}, 401],
      ['/admin/artifacts', {}, 401],
      ['/lineage/manifests', {}, 401],
      ['/rm/prod/batch_score', {}, 401],
      ['/runs', {}, 401],
      ['/score/batch', wrong, 401],
      ['/t/rh_not-a-token-at-all/compat/openrlhf', {}, 401],
      ['/score/batch', { authorization: 'Basic' }, 401],
      ['/admin/artifacts', { authorization: `Bearer ${run.token}` }, 403],
      ['/rm/prod/batch_score', { authorization: `Bearer ${run.token}` }, 403],
    ]
    for (const [path, headers, status] of cases) {
      const answer = await post(path, 768 * 1024, headers)
      expect([path, answer.status, answer.pulled], answer.text).toEqual([path, status, 0])
    }
  })

  it('POST /healthz reads nothing, however small or large its body', async () => {
    // A body up to MAX_DRAINED_BYTES is drained after any other answer: the health routes are marked to leave it.
    for (const path of ['/healthz', '/rm/prod/healthz'])
      for (const size of [MAX_DRAINED_BYTES, MIB]) {
        const answer = await post(path, size, {}, { ...env, DEPLOYMENT: 'local' })
        expect([path, size, answer.pulled]).toEqual([path, size, 0])
      }
  })

  it('reads a small unneeded body to its end once answered (keep-alive), never a larger one', async () => {
    const local = { ...env, DEPLOYMENT: 'local' }
    const small = await post('/no-such-route', MAX_DRAINED_BYTES, {}, local)
    expect([small.status, small.pulled]).toEqual([404, MAX_DRAINED_BYTES])
    const refused = await post('/score/batch', MAX_DRAINED_BYTES, {})
    expect([refused.status, refused.pulled]).toEqual([401, MAX_DRAINED_BYTES])
    const large = await post('/no-such-route', MAX_DRAINED_BYTES + 1, {}, local)
    expect([large.status, large.pulled]).toEqual([404, 0])
  })

  it('an accepted request still reads its body (the admin uploading)', async () => {
    const answer = await post('/admin/artifacts', 1024, { authorization: `Bearer ${ADMIN_TOKEN}` })
    expect(answer.status).toBe(400)
    expect(answer.pulled).toBe(1024)
  })
})
