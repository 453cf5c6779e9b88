/**
 * `npm run serve`: the built Worker on Miniflare alone, started as a user starts it (own port, own `--persist-to`
 * state, migrations applied by the script), answers `/healthz`, scores on the default run with its Durable Objects and
 * D1, and serves an `/rm` target deployed with the CLI under the admin token it was given in the environment.
 */
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { Agent, request as httpRequest } from 'node:http'
import { freePort, WRANGLER_ENV } from '../../offline/dev/start.ts'
import { ROOT, runRewardHarness } from '../support/child.ts'
import { callJson, METADATA } from './support/http.ts'

/** Given in the environment, so the test never writes .dev.vars (a wrangler dev of another test would reload). */
const ADMIN_TOKEN = `rh_e2e_admin_${randomBytes(16).toString('hex')}`
let state: string
let baseUrl: string
let stop: () => void

beforeAll(async () => {
  state = mkdtempSync(join(tmpdir(), 'rh-serve-'))
  const port = await freePort()
  const child = spawn('npx', ['tsx', 'offline/dev/serve.ts', '--persist-to', state], {
    cwd: ROOT,
    env: { ...WRANGLER_ENV, PORT: String(port), ADMIN_TOKEN },
    detached: true,
    stdio: 'ignore',
  })
  stop = () => {
    try {
      process.kill(-child.pid!, 'SIGTERM')
    } catch {
      // already gone
    }
  }
  baseUrl = `http://127.0.0.1:${port}`
  await vi.waitFor(async () => expect((await fetch(`${baseUrl}/healthz`).catch(() => undefined))?.status).toBe(200), {
    timeout: 110_000,
    interval: 500,
  })
}, 120_000)

afterAll(() => {
  stop?.()
  if (state) rmSync(state, { recursive: true, force: true })
})

describe('npm run serve', () => {
  it('scores on the default run and serves a deployed /rm target, on its own state', async () => {
    const scored = await callJson(`${baseUrl}/score`, {
      body: { rollout: { id: 'serve-1', input: 'What is 2 + 2?', output: 'The answer is 4.' }, metadata: METADATA },
    })
    expect(scored.status, JSON.stringify(scored.body)).toBe(200)
    expect(scored.body.score).toBeGreaterThanOrEqual(0)
    expect((await callJson(`${baseUrl}/rm/serve/healthz`)).body.error.code).toBe('target_not_found')

    const cli = (args: string[]) =>
      runRewardHarness(args, { REWARD_HARNESS_ADMIN_TOKEN: ADMIN_TOKEN, USER: 'e2e' }, 60_000)
    const [search, artifact] = [join(state, 'best.json'), join(state, 'rm.json')]
    const dataset = ['--dataset', 'examples/demo.json', '--backend', 'mock', '--generations', '1']
    expect((await cli(['search', ...dataset, '--output', search])).code).toBe(0)
    expect((await cli(['export', '--search-output', search, '--out', artifact])).code).toBe(0)
    const deployed = await cli(['deploy', '--artifact', artifact, '--target', 'serve', '--url', baseUrl])
    expect(deployed.code, deployed.err).toBe(0)

    const items = Array.from({ length: 16 }, (_, i) => ({
      prompt_id: `unseen-${i}`,
      prompt: 'What is 2 + 2?',
      candidate: { candidate_id: `c${i}`, text: `The answer is ${i}.`, source: 'verl', metadata: {} },
    }))
    const batch = await callJson(`${baseUrl}/rm/serve/batch_score`, { body: { items } })
    expect(batch.status, JSON.stringify(batch.body)).toBe(200)
    expect(batch.body.results.map((result: { ok: boolean; index: number }) => [result.index, result.ok])).toEqual(
      items.map((_, i) => [i, true]),
    )
    expect(batch.body.artifact_id).toBe(JSON.parse(readFileSync(artifact, 'utf8')).artifact_id)
  }, 120_000)

  it('an answer that needs no body still reads it, so a keep-alive client keeps its connection', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    const post = (path: string, body: string) =>
      new Promise<{ status: number; reused: boolean }>((resolve, reject) => {
        const req = httpRequest(`${baseUrl}${path}`, {
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        })
        req.on('response', (res) => {
          res.resume()
          res.on('end', () => resolve({ status: res.statusCode ?? 0, reused: req.reusedSocket }))
        })
        req.on('error', reject)
        req.end(body)
      })
    const padding = 'x'.repeat(64 * 1024)
    // Answered without any handler reading the body (no such route), twice on one kept-alive connection.
    expect((await post('/no-such-route', JSON.stringify({ padding }))).status).toBe(404)
    const next = await post('/healthz-not-a-post', JSON.stringify({ padding }))
    expect(next).toEqual({ status: 404, reused: true })
    agent.destroy()
  })

  it('answers a body over its limit with 413 naming the limit, not a reset, when a client writes it all', async () => {
    // What a trainer's HTTP client does: announce the length, write the whole body, then read the answer.
    const post = (body: Buffer) =>
      new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = httpRequest(`${baseUrl}/score/batch`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'content-length': body.length },
        })
        req.on('response', (res) => {
          const chunks: Buffer[] = []
          res.on('data', (chunk: Buffer) => chunks.push(chunk))
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }))
        })
        req.on('error', reject)
        req.end(body)
      })
    const over = Buffer.alloc(17 * 1024 * 1024, 0x20)
    for (let attempt = 0; attempt < 5; attempt++) {
      const answer = await post(over)
      expect(answer.status).toBe(413)
      expect(JSON.parse(answer.text).error).toMatchObject({ code: 'payload_too_large', details: { kind: 'batch' } })
    }
  }, 60_000)
})
