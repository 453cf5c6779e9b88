/**
 * Hostile inputs against a production-mode `wrangler dev` (issues 31 and 46): an artifact whose extraction pattern
 * backtracks exponentially in JavaScript's engine, or whose matches each rescan the rest of the text, is served in
 * linear time while /healthz keeps answering; an anonymous 16 MiB body is refused (the Worker reads none of it:
 * tests/workers/refuse-before-reading.test.ts counts), the client seeing its 401 and going on; and an allow-listed
 * judge that redirects to another origin gets no secret header and no prompt sent there, the score failing as
 * `llm_unavailable` naming the redirect.
 */
import { createServer, Agent, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { artifactId, RmArtifactBody } from '../../src/schemas/artifact.ts'
import { buildArtifact } from './support/artifact.ts'
import { callJson } from './support/http.ts'
import { startWranglerDev, type WranglerDev } from './support/wrangler-dev.ts'

const RM_TOKEN = `rh_e2e_rm_${Math.random().toString(36).slice(2)}`
const JUDGE_SECRET = `judge-secret-${Math.random().toString(36).slice(2)}`
let dev: WranglerDev

/** A listener on 127.0.0.1 that records the headers and body of every request and answers with `answer`. */
async function listener(answer: () => { status: number; headers?: Record<string, string> }) {
  const received: { headers: IncomingHttpHeaders; body: string }[] = []
  const server: Server = createServer((req, res) => {
    let body = ''
    req.on('data', (chunk: Buffer) => (body += chunk.toString()))
    req.on('end', () => {
      received.push({ headers: req.headers, body })
      const reply = answer()
      res.writeHead(reply.status, reply.headers).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return { received, port, close: () => new Promise((done) => server.close(done)) }
}

/** Where the judge points its redirect: an origin the allow-list does not name. */
let elsewhere: Awaited<ReturnType<typeof listener>>
/** The allow-listed judge, which redirects every call to `elsewhere`. */
let judge: Awaited<ReturnType<typeof listener>>

beforeAll(async () => {
  elsewhere = await listener(() => ({ status: 200 }))
  judge = await listener(() => ({
    status: 307,
    headers: { location: `http://127.0.0.1:${elsewhere.port}/v1/chat/completions` },
  }))
  dev = await startWranglerDev({
    deployment: 'production',
    vars: {
      RM_TOKEN,
      LLM_HOST_ALLOWLIST: `127.0.0.1:${judge.port}`,
      JUDGE_KEY_NAMES: 'JUDGE_SECRET',
      JUDGE_SECRET,
    },
  })
})

afterAll(async () => {
  await dev?.stop()
  await judge?.close()
  await elsewhere?.close()
})

describe('a third-party artifact cannot stall the Worker', () => {
  it.each([
    ['^(a+)+$', `${'a'.repeat(10_000)}!`, 'redos'],
    ['x(.*y)?', 'x'.repeat(100_000), 'rescan'],
  ])('scores %s against its worst prompt on /rm, and /healthz answers meanwhile', async (pattern, prompt, target) => {
    const { artifact_id: _id, ...base } = await buildArtifact()
    const body = RmArtifactBody.parse({
      ...base,
      runtime: { ...base.runtime, extraction: { prompt: { kind: 'regex', pattern } } },
    })
    const artifact = { ...body, artifact_id: await artifactId(body) }
    const admin = { token: dev.adminToken }
    expect((await callJson(`${dev.baseUrl}/admin/artifacts`, { ...admin, body: artifact })).status).toBe(201)
    const deployment = { artifact_id: artifact.artifact_id }
    expect(
      (await callJson(`${dev.baseUrl}/admin/targets/${target}/deployments`, { ...admin, body: deployment })).status,
    ).toBe(201)
    // A backtracking engine would never answer, and matches that each rescan the rest of the text took 29 s: the
    // request's timeout is the bound, generous for a busy machine.
    const scored = callJson(`${dev.baseUrl}/rm/${target}/score`, {
      token: RM_TOKEN,
      timeoutMs: 20_000,
      body: {
        prompt_id: 'p_math',
        prompt,
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

describe('a judge that redirects', () => {
  it('to another origin gets no secret and no prompt sent there: the score is llm_unavailable naming it', async () => {
    const artifact = await buildArtifact()
    const admin = { token: dev.adminToken }
    expect((await callJson(`${dev.baseUrl}/admin/artifacts`, { ...admin, body: artifact })).status).toBe(201)
    const deployment = {
      artifact_id: artifact.artifact_id,
      llm: {
        base_url: `http://127.0.0.1:${judge.port}/v1`,
        model: 'judge',
        headers: { 'X-Judge-Secret': { secret: 'JUDGE_SECRET' } },
      },
    }
    const deployed = await callJson(`${dev.baseUrl}/admin/targets/redirect/deployments`, { ...admin, body: deployment })
    expect(deployed.status, JSON.stringify(deployed.body)).toBe(201)
    const scored = await callJson(`${dev.baseUrl}/rm/redirect/score`, {
      token: RM_TOKEN,
      body: { prompt_id: 'p_math', prompt: 'the secret prompt', candidate: { candidate_id: 'c1', text: '4' } },
    })
    expect(scored.status, JSON.stringify(scored.body)).toBe(502)
    expect(scored.body.error.code).toBe('llm_unavailable')
    expect(scored.body.error.message).toMatch(
      new RegExp(`redirected \\(HTTP 307\\) to http://127\\.0\\.0\\.1:${elsewhere.port}/.*another origin`),
    )
    // The judge got the call with its secret; the redirect's target got nothing at all.
    expect(judge.received[0]!.headers['x-judge-secret']).toBe(JUDGE_SECRET)
    expect(elsewhere.received).toEqual([])
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
