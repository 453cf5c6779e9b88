/**
 * Hostile inputs against a production-mode `wrangler dev` (issue 31): an artifact whose extraction pattern backtracks
 * exponentially in JavaScript's engine is served in linear time while /healthz keeps answering, and an anonymous
 * 16 MiB body is refused (the Worker reads none of it: tests/workers/refuse-before-reading.test.ts counts), the client
 * seeing its 401 and going on.
 */
import { Agent, request as httpRequest } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { artifactId, RmArtifactBody } from '../../src/schemas/artifact.ts'
import { buildArtifact } from './support/artifact.ts'
import { callJson } from './support/http.ts'
import { startWranglerDev, type WranglerDev } from './support/wrangler-dev.ts'

const RM_TOKEN = `rh_e2e_rm_${Math.random().toString(36).slice(2)}`
let dev: WranglerDev

beforeAll(async () => {
  dev = await startWranglerDev({ deployment: 'production', vars: { RM_TOKEN } })
})

afterAll(async () => {
  await dev?.stop()
})

describe('a third-party artifact cannot stall the Worker', () => {
  it('scores ^(a+)+$ against 10,000 a and a ! on /rm, and /healthz answers meanwhile', async () => {
    const { artifact_id: _id, ...base } = await buildArtifact()
    const body = RmArtifactBody.parse({
      ...base,
      runtime: { ...base.runtime, extraction: { prompt: { kind: 'regex', pattern: '^(a+)+$' } } },
    })
    const artifact = { ...body, artifact_id: await artifactId(body) }
    const admin = { token: dev.adminToken }
    expect((await callJson(`${dev.baseUrl}/admin/artifacts`, { ...admin, body: artifact })).status).toBe(201)
    const deployment = { artifact_id: artifact.artifact_id }
    expect(
      (await callJson(`${dev.baseUrl}/admin/targets/redos/deployments`, { ...admin, body: deployment })).status,
    ).toBe(201)
    // A backtracking engine would never answer: the request's timeout is the bound, generous for a busy machine.
    const scored = callJson(`${dev.baseUrl}/rm/redos/score`, {
      token: RM_TOKEN,
      timeoutMs: 20_000,
      body: {
        prompt_id: 'p_math',
        prompt: `${'a'.repeat(10_000)}!`,
        candidate: { candidate_id: 'c1', text: 'The answer is 4.', source: 'verl', metadata: {} },
      },
    })
    const health = await callJson(`${dev.baseUrl}/healthz`, { timeoutMs: 20_000 })
    expect(health.status).toBe(200)
    const answer = await scored
    expect(answer.status, JSON.stringify(answer.body)).toBe(200)
    expect(answer.body.score).toBeGreaterThanOrEqual(0)
  })

  it('refuses a pattern that needs backtracking at upload, naming the field and the feature', async () => {
    const { artifact_id: _id, ...base } = await buildArtifact()
    const body = { ...base, runtime: { ...base.runtime, extraction: { prompt: { kind: 'regex', pattern: '(a)\\1' } } } }
    const refused = await callJson(`${dev.baseUrl}/admin/artifacts`, {
      token: dev.adminToken,
      body: { ...body, artifact_id: `rm_${'0'.repeat(64)}` },
    })
    expect(refused.status).toBe(400)
    expect(refused.body.error.details).toContainEqual({
      path: 'runtime.extraction.prompt.pattern',
      message: expect.stringMatching(/backreferences/),
    })
  })
})

describe('anonymous bodies', () => {
  it('a 16 MiB body without a token gets its 401, unread by the Worker; a keep-alive client goes on', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    const post = (path: string, size: number) =>
      new Promise<{ status: number | 'closed'; reused: boolean }>((resolve, reject) => {
        let answered = false
        const req = httpRequest(`${dev.baseUrl}${path}`, {
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/json', 'content-length': size },
        })
        req.on('response', (res) => {
          answered = true
          res.resume()
          res.on('end', () => resolve({ status: res.statusCode ?? 0, reused: req.reusedSocket }))
        })
        // The runtime closes a connection whose body nobody read: a client still sending may see that (a failure here).
        const closed = (error: NodeJS.ErrnoException) =>
          ['EPIPE', 'ECONNRESET'].includes(error.code ?? '')
            ? answered || resolve({ status: 'closed', reused: req.reusedSocket })
            : reject(error)
        req.on('error', closed)
        req.on('socket', (socket) => socket.on('error', closed))
        req.end(Buffer.alloc(size, 0x20))
      })
    const refused = await post('/score/batch', 16 * 1024 * 1024)
    expect(refused.status).toBe(401)
    // What the Worker left unread, the runtime took in itself; the connection stays usable either way.
    expect((await post('/score', 2)).status).toBe(401)
    // A small refused body is read once the answer is decided, and the connection kept.
    expect(await post('/score', 1024)).toEqual({ status: 401, reused: true })
    agent.destroy()
  })
})
