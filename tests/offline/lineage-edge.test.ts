/**
 * `reward-harness lineage … --url <edge>`: the CLI through the edge API client (offline/lineage/http.ts), against a
 * loopback stub of `/lineage/*` backed by an in-memory store; the token comes from REWARD_HARNESS_ADMIN_TOKEN.
 */
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { main } from '../../offline/cli/index.ts'
import { openLocalLineage } from '../../offline/lineage/local.ts'

const TOKEN = 'edge-admin'
const dir = mkdtempSync(join(tmpdir(), 'lineage-edge-'))
const store = openLocalLineage(':memory:')
let server: Server
let url = ''

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = ''
    req.on('data', (chunk) => (body += chunk))
    req.on('end', async () => {
      const reply = (status: number, value: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' })
        res.end(JSON.stringify(value))
      }
      if (req.headers.authorization !== `Bearer ${TOKEN}`) return reply(401, { error: { message: 'bad token' } })
      const path = new URL(req.url ?? '/', 'http://x')
      try {
        if (req.method === 'POST' && path.pathname === '/lineage/manifests')
          return reply(201, await store.backend.recordManifest(JSON.parse(body)))
        if (req.method === 'POST' && path.pathname === '/lineage/results')
          return reply(201, await store.backend.recordResult(JSON.parse(body)))
        if (req.method === 'POST' && path.pathname === '/lineage/evals')
          return reply(201, await store.backend.recordEval(JSON.parse(body)))
        if (req.method === 'GET' && path.pathname === '/lineage/runs')
          return reply(200, {
            runs: await store.backend.listRuns({ limit: Number(path.searchParams.get('limit') ?? 100) }),
          })
        const id = path.pathname.match(/^\/lineage\/runs\/([^/]+)$/)?.[1]
        if (req.method === 'GET' && id) {
          const chain = await store.backend.chain(decodeURIComponent(id))
          return chain ? reply(200, chain) : reply(404, { error: { message: 'no run' } })
        }
        return reply(404, { error: { message: 'no route' } })
      } catch (error) {
        return reply(400, { error: { message: (error as Error).message } })
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
afterAll(() => {
  server.close()
  store.close()
  rmSync(dir, { recursive: true, force: true })
})

let counter = 0
function file(value: unknown): string {
  const path = join(dir, `f-${++counter}.json`)
  writeFileSync(path, JSON.stringify(value))
  return path
}

async function run(args: string[]) {
  let out = ''
  let err = ''
  const saved = process.env.REWARD_HARNESS_ADMIN_TOKEN
  process.env.REWARD_HARNESS_ADMIN_TOKEN = TOKEN
  try {
    const code = await main(['lineage', ...args, '--url', url], {
      out: (t) => void (out += t),
      err: (t) => void (err += t),
    })
    return { code, out, err }
  } finally {
    if (saved === undefined) delete process.env.REWARD_HARNESS_ADMIN_TOKEN
    else process.env.REWARD_HARNESS_ADMIN_TOKEN = saved
  }
}

describe('lineage --url', () => {
  it('records through the edge API, shows the chain and gates regressions', async () => {
    for (const [runId, startedAt, accuracy] of [
      ['e-1', '2026-01-01T00:00:00Z', 0.8],
      ['e-2', '2026-01-02T00:00:00Z', 0.6],
    ] as const) {
      expect(
        (
          await run([
            'record-manifest',
            file({
              schema_version: '1.0',
              run_id: runId,
              trainer: { name: 'verl' },
              model: { name: 'm' },
              dataset: { id: 'd', version: 'v1' },
              artifact_id: 'rm_x',
              deploy_id: 'dep_x',
              started_at: startedAt,
            }),
          ])
        ).code,
      ).toBe(0)
      expect(
        (
          await run([
            'record-eval',
            file({
              schema_version: '1.0',
              eval_id: `${runId}-ev`,
              run_id: runId,
              benchmark: 'gsm8k',
              metrics: { accuracy },
              created_at: startedAt,
            }),
          ])
        ).code,
      ).toBe(0)
    }
    const shown = await run(['show', 'e-1'])
    expect(shown.code).toBe(0)
    expect(shown.out).toContain('deployment  dep_x')
    expect(
      (await run(['check-regression', '--baseline', 'e-1', '--candidate', 'latest', '--metric', 'accuracy:higher']))
        .code,
    ).toBe(1)
    expect(
      (await run(['check-regression', '--baseline', 'e-2', '--candidate', 'e-1', '--metric', 'accuracy:higher'])).code,
    ).toBe(0)
    const missing = await run(['show', 'nope'])
    expect(missing.code).toBe(2)
    const orphan = await run([
      'record-result',
      file({ schema_version: '1.0', run_id: 'nope', status: 'succeeded', finished_at: '2026-01-03T00:00:00Z' }),
    ])
    expect(orphan.code).toBe(2)
    expect(orphan.err).toContain('no manifest')
  })
})
