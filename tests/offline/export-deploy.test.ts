/**
 * `reward-harness deploy | rollback | deployments` against an in-memory stub of the edge's admin API on loopback (the
 * real edge is covered by tests/e2e/deploy.test.ts): local validation before any request, the token from the
 * environment, exit codes (2 refused input and edge 4xx with details shown, 1 network and 5xx), retries on 429/503
 * only, tables and JSON. The client's retry policy is unit-tested with a fake fetch.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir, userInfo } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { buildArtifact } from '../../offline/artifacts/export.ts'
import { AdminClient, DEFAULT_RETRY } from '../../offline/deploy/client.ts'
import { deployedBy, llmOf } from '../../offline/deploy/run.ts'
import { EdgeHttpError, EdgeNetworkError, EdgeProtocolError } from '../../offline/deploy/errors.ts'
import { formatDeployments } from '../../offline/deploy/format.ts'
import { parseRetryAfter, retryDelayMs } from '../../src/llm/retry.ts'
import { artifactId, RmArtifact, type DeployRecord } from '../../src/schemas/artifact.ts'
import { runRewardHarness } from '../support/child.ts'

const TOKEN = 'test-admin-token'

/** `reward-harness <args>` as a child process with the stub's admin token. */
const cli = (args: string[], env: Record<string, string | undefined> = {}) =>
  runRewardHarness(args, { REWARD_HARNESS_ADMIN_TOKEN: TOKEN, USER: 'tester', ...env })

// ---------------------------------------------------------------------------------------------
// A stub of the admin API: the contract's routes, in memory, with injectable faults.

interface StubRequest {
  method: string
  path: string
  auth: string | undefined
  body: any
}

class AdminStub {
  server!: Server
  url = ''
  requests: StubRequest[] = []
  artifacts = new Map<string, RmArtifact>()
  history = new Map<string, DeployRecord[]>()
  /** Statuses answered (in order) before a path is served for real. */
  faults = new Map<string, Array<{ status: number; retryAfter?: string }>>()
  private sequence = 0

  async start(): Promise<void> {
    this.server = createServer(
      (request, response) =>
        void this.handle(request).then(({ status, body, headers }) => {
          response.writeHead(status, { 'content-type': 'application/json', ...headers })
          response.end(JSON.stringify(body))
        }),
    )
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve))
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`
  }

  reset(): void {
    this.requests = []
    this.artifacts.clear()
    this.history.clear()
    this.faults.clear()
  }

  private async handle(
    request: IncomingMessage,
  ): Promise<{ status: number; body: unknown; headers?: Record<string, string> }> {
    let text = ''
    for await (const chunk of request) text += chunk
    const path = new URL(request.url!, 'http://x').pathname
    const body = text ? JSON.parse(text) : undefined
    this.requests.push({ method: request.method!, path, auth: request.headers.authorization, body })
    const fault = this.faults.get(path)?.shift()
    if (fault)
      return {
        status: fault.status,
        body: { error: { code: `stub_${fault.status}`, message: 'injected' } },
        ...(fault.retryAfter ? { headers: { 'retry-after': fault.retryAfter } } : {}),
      }
    if (request.headers.authorization !== `Bearer ${TOKEN}`)
      return { status: 401, body: { error: { code: 'unauthorized', message: 'admin token required' } } }
    const error = (status: number, code: string, message: string, details?: unknown) => ({
      status,
      body: { error: { code, message, ...(details ? { details } : {}) }, request_id: 'r1' },
    })
    if (request.method === 'POST' && path === '/admin/artifacts') {
      const parsed = RmArtifact.safeParse(body)
      if (!parsed.success)
        return error(
          400,
          'invalid_artifact',
          'the artifact fails the schema',
          parsed.error.issues.map((issue) => ({ path: issue.path.join('.'), message: issue.message })),
        )
      if (parsed.data.rubrics.p_policy_brief?.criteria.some((criterion) => criterion.text.includes('FORBIDDEN'))) {
        return error(400, 'invalid_artifact', 'a serving check failed', [
          { path: 'rubrics.p_policy_brief', message: 'contains FORBIDDEN' },
        ])
      }
      const stored = !this.artifacts.has(parsed.data.artifact_id)
      this.artifacts.set(parsed.data.artifact_id, parsed.data)
      return { status: stored ? 201 : 200, body: { artifact_id: parsed.data.artifact_id, stored } }
    }
    const match = path.match(/^\/admin\/targets\/([^/]+)\/(deployments|rollback)$/)
    if (!match) return error(404, 'not_found', `no route for ${request.method} ${path}`)
    const target = decodeURIComponent(match[1]!)
    const history = this.history.get(target) ?? []
    this.history.set(target, history)
    const active = history[0]
    const record = (action: 'deploy' | 'rollback', artifactId: string, previous: string | null): DeployRecord => {
      const artifact = this.artifacts.get(artifactId)!
      return {
        deploy_id: `dep_${++this.sequence}`,
        target,
        artifact_id: artifactId,
        previous_artifact_id: previous,
        deployed_by: body?.deployed_by ?? 'admin',
        deployed_at: new Date(Date.UTC(2026, 0, 1, 0, 0, this.sequence)).toISOString(),
        action,
        dataset_sha256: artifact.provenance.dataset_sha256,
        config_hash: artifact.provenance.config_hash,
      }
    }
    if (request.method === 'GET' && match[2] === 'deployments')
      return { status: 200, body: { target, active_artifact_id: active?.artifact_id ?? null, deployments: history } }
    if (request.method === 'POST' && match[2] === 'deployments') {
      if (!this.artifacts.has(body.artifact_id))
        return error(404, 'artifact_not_found', `no artifact "${body.artifact_id}"`)
      const created = record('deploy', body.artifact_id, active?.artifact_id ?? null)
      history.unshift(created)
      return { status: 201, body: created }
    }
    if (request.method === 'POST' && match[2] === 'rollback') {
      if (!active?.previous_artifact_id)
        return error(409, 'nothing_to_roll_back', `target "${target}" has nothing to roll back to`)
      const created = record('rollback', active.previous_artifact_id, active.artifact_id)
      history.unshift(created)
      return { status: 201, body: created }
    }
    return error(404, 'not_found', 'no route')
  }
}

const stub = new AdminStub()
let work: string
let artifactA: string
let artifactB: string
let idA: string
let idB: string

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'deploy-cli-'))
  await stub.start()
  // Two artifacts from one real search output (they differ in their default rubric).
  const output = join(work, 'search/best.json')
  const search = await cli([
    'search',
    '--dataset',
    'examples/demo.json',
    '--backend',
    'mock',
    '--output',
    output,
    '--generations',
    '1',
    '--json',
  ])
  expect(search.code, search.err).toBe(0)
  const text = readFileSync(output, 'utf8')
  const a = await buildArtifact(text, { name: output })
  const b = await buildArtifact(text, { name: output, defaultRubric: 'p_math_trains' })
  artifactA = join(work, 'a.json')
  artifactB = join(work, 'b.json')
  writeFileSync(artifactA, a.text)
  writeFileSync(artifactB, b.text)
  idA = a.artifact.artifact_id
  idB = b.artifact.artifact_id
  expect(idA).not.toBe(idB)
}, 60_000)
beforeEach(() => stub.reset())
afterAll(async () => {
  await new Promise((resolve) => stub.server.close(resolve))
  rmSync(work, { recursive: true, force: true })
})

describe('deploy, rollback, deployments against a stub edge', () => {
  it('deploys (upload, activate), redeploys, rolls back and lists, in text and JSON', async () => {
    const first = await cli(['deploy', '--artifact', artifactA, '--target', 'prod', '--url', `${stub.url}/`, '--json'])
    expect(first.err).toBe('')
    expect(first.code).toBe(0)
    expect(JSON.parse(first.out)).toMatchObject({
      target: 'prod',
      artifact_id: idA,
      previous_artifact_id: null,
      action: 'deploy',
      deployed_by: 'tester',
    })
    expect(stub.requests.map((request) => `${request.method} ${request.path}`)).toEqual([
      'POST /admin/artifacts',
      'POST /admin/targets/prod/deployments',
    ])
    expect(stub.requests.every((request) => request.auth === `Bearer ${TOKEN}`)).toBe(true)
    expect(stub.requests[0]!.body).toEqual(JSON.parse(readFileSync(artifactA, 'utf8')))
    expect(stub.requests[1]!.body).toEqual({ artifact_id: idA, deployed_by: 'tester' })

    const second = await cli([
      'deploy',
      '--artifact',
      artifactB,
      '--target',
      'prod',
      '--url',
      stub.url,
      '--deployed-by',
      'ci',
      '--llm-base-url',
      'https://llm.example.com/v1',
      '--llm-model',
      'm1',
      '--llm-api-key-env',
      'LLM_KEY',
    ])
    expect(second.code, second.err).toBe(0)
    expect(second.out).toContain(`deployed ${idB} (${artifactB}, uploaded) to target prod`)
    expect(second.out).toMatch(new RegExp(`previous +${idA}`))
    expect(second.out).toMatch(/deployed_by +ci/)
    expect(stub.requests.at(-1)!.body).toEqual({
      artifact_id: idB,
      deployed_by: 'ci',
      llm: { base_url: 'https://llm.example.com/v1', model: 'm1', api_key_env: 'LLM_KEY' },
    })

    // The same artifact on another target: already stored, deployed there.
    const again = await cli(['deploy', '--artifact', artifactB, '--target', 'staging', '--url', stub.url])
    expect(again.out).toContain('already stored at the edge) to target staging')

    const rollback = await cli(['rollback', '--target', 'prod', '--url', stub.url, '--json'])
    expect(rollback.code, rollback.err).toBe(0)
    expect(JSON.parse(rollback.out)).toMatchObject({ action: 'rollback', artifact_id: idA, previous_artifact_id: idB })

    const list = await cli(['deployments', '--target', 'prod', '--url', stub.url, '--json'])
    expect(list.code).toBe(0)
    const history = JSON.parse(list.out)
    expect(history.active_artifact_id).toBe(idA)
    expect(history.deployments.map((record: DeployRecord) => [record.action, record.artifact_id])).toEqual([
      ['rollback', idA],
      ['deploy', idB],
      ['deploy', idA],
    ])
    const table = await cli(['deployments', '--target', 'prod', '--url', stub.url])
    expect(table.out.split('\n')[0]).toBe(`target prod: active ${idA}, 3 deployments`)
    expect(table.out).toMatch(
      /^ {2}\* +2026-01-01T00:00:\d\d\.000Z +rollback +rm_[0-9a-f]{12}… +rm_[0-9a-f]{12}… +tester +dep_\d+$/m,
    )
  }, 60_000)

  it('validates the artifact locally first: an edited one is refused with exit 2 and nothing is sent', async () => {
    const edited = JSON.parse(readFileSync(artifactA, 'utf8'))
    edited.rubrics.p_math_trains.criteria[0].weight = 0.99
    const file = join(work, 'edited.json')
    writeFileSync(file, JSON.stringify(edited, null, 2))
    const run = await cli(['deploy', '--artifact', file, '--target', 'prod', '--url', stub.url])
    expect(run.code).toBe(2)
    const hash = 'rm_[0-9a-f]{64}'
    expect(run.err).toMatch(
      new RegExp(
        `artifact_id ${hash} is not the hash of the content \\(${hash}\\); was the file edited after export\\?`,
      ),
    )
    edited.rubrics.p_math_trains.criteria[0].weight = -1
    writeFileSync(file, JSON.stringify(edited))
    const negative = await cli(['deploy', '--artifact', file, '--target', 'prod', '--url', stub.url, '--json'])
    expect(negative.code).toBe(2)
    expect(JSON.parse(negative.err).error).toMatchObject({
      code: 'invalid_artifact',
      issues: [expect.stringMatching(/^rubrics\.p_math_trains\.criteria\[0\]\.weight: /)],
    })
    expect(stub.requests).toEqual([])
  }, 30_000)

  it('shows an edge 400 with its details (exit 2), and a 409 nothing_to_roll_back (exit 2)', async () => {
    // An artifact the stub's serving check refuses (valid and correctly addressed, so it passes local validation).
    const source = RmArtifact.parse(JSON.parse(readFileSync(artifactA, 'utf8')))
    const { artifact_id: _id, ...body } = source
    body.rubrics.p_policy_brief!.criteria[0]!.text = 'FORBIDDEN'
    const forbidden = { artifact_id: await artifactId(body), ...body }
    const file = join(work, 'forbidden.json')
    writeFileSync(file, JSON.stringify(forbidden))
    const text = await cli(['deploy', '--artifact', file, '--target', 'prod', '--url', stub.url])
    expect(text.code).toBe(2)
    expect(text.err).toContain(
      'error: the edge refused the request: POST /admin/artifacts → 400 invalid_artifact: a serving check failed',
    )
    expect(text.err).toContain('  - rubrics.p_policy_brief: contains FORBIDDEN')
    const json = await cli(['deploy', '--artifact', file, '--target', 'prod', '--url', stub.url, '--json'])
    expect(json.code).toBe(2)
    expect(JSON.parse(json.err).error).toMatchObject({
      kind: 'bad_input',
      code: 'invalid_artifact',
      status: 400,
      details: [{ path: 'rubrics.p_policy_brief', message: 'contains FORBIDDEN' }],
    })
    expect(stub.requests.filter((request) => request.path.includes('/targets/'))).toEqual([])

    const rollback = await cli(['rollback', '--target', 'fresh', '--url', stub.url])
    expect(rollback.code).toBe(2)
    expect(rollback.err).toContain('409 nothing_to_roll_back')
  }, 30_000)

  it('needs the admin token (exit 2), reports a refused token (exit 2) and an unreachable edge (exit 1)', async () => {
    const noDevVars = join(mkdtempSync(join(tmpdir(), 'rh-devvars-')), '.dev.vars')
    const missing = await cli(['deployments', '--target', 'prod', '--url', stub.url], {
      REWARD_HARNESS_ADMIN_TOKEN: undefined,
      REWARD_HARNESS_DEV_VARS: noDevVars,
    })
    expect(missing.code).toBe(2)
    // A server on this machine: it names the .dev.vars it looked in and how to get one.
    expect(missing.err).toContain(`the admin token is missing: REWARD_HARNESS_ADMIN_TOKEN is unset and no ADMIN_TOKEN`)
    expect(missing.err).toContain(noDevVars)
    expect(missing.err).toContain('npm start')
    const wrong = await cli(['deployments', '--target', 'prod', '--url', stub.url], {
      REWARD_HARNESS_ADMIN_TOKEN: 'nope',
    })
    expect(wrong.code).toBe(2)
    expect(wrong.err).toContain('the edge refused the admin token')
    stub.reset()
    const closed = createServer()
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
    const port = (closed.address() as AddressInfo).port
    await new Promise((resolve) => closed.close(resolve))
    const down = await cli([
      'deploy',
      '--artifact',
      artifactA,
      '--target',
      'prod',
      '--url',
      `http://127.0.0.1:${port}`,
      '--json',
    ])
    expect(down.code).toBe(1)
    expect(JSON.parse(down.err).error).toMatchObject({
      kind: 'failure',
      code: 'network_error',
      message: expect.stringContaining(`cannot reach the edge at http://127.0.0.1:${port} (POST /admin/artifacts`),
    })
    for (const args of [
      ['deployments', '--target', 'Prod!', '--url', stub.url],
      ['deployments', '--target', 'prod', '--url', 'ftp://x'],
      ['deploy', '--artifact', artifactA, '--target', 'prod', '--url', stub.url, '--llm-model', 'm'],
      [
        'deploy',
        '--artifact',
        artifactA,
        '--target',
        'prod',
        '--url',
        stub.url,
        '--llm-base-url',
        'https://x/v1',
        '--llm-api-key-env',
        'sk-123-secret',
      ],
      ['deploy', '--target', 'prod', '--url', stub.url],
    ]) {
      const run = await cli(args)
      expect(run.code, args.join(' ')).toBe(2)
    }
    expect(stub.requests).toEqual([])
  }, 60_000)

  it('takes the admin token from .dev.vars for a server on this machine, never for a remote one', async () => {
    const devVars = join(mkdtempSync(join(tmpdir(), 'rh-devvars-')), '.dev.vars')
    writeFileSync(devVars, `OTHER=1\nADMIN_TOKEN=${TOKEN}\n`)
    const local = await cli(['deployments', '--target', 'prod', '--url', stub.url], {
      REWARD_HARNESS_ADMIN_TOKEN: undefined,
      REWARD_HARNESS_DEV_VARS: devVars,
    })
    expect(local.code, local.err).toBe(0)
    expect(stub.requests.map((request) => request.auth)).toEqual([`Bearer ${TOKEN}`])
    const remote = await cli(['deployments', '--target', 'prod', '--url', 'https://rm.example.invalid'], {
      REWARD_HARNESS_ADMIN_TOKEN: undefined,
      REWARD_HARNESS_DEV_VARS: devVars,
    })
    expect(remote.code).toBe(2)
    expect(remote.err).toContain('set REWARD_HARNESS_ADMIN_TOKEN to the ADMIN_TOKEN of https://rm.example.invalid')
    // The environment wins over the file.
    const refused = await cli(['deployments', '--target', 'prod', '--url', stub.url], {
      REWARD_HARNESS_ADMIN_TOKEN: 'from-env',
      REWARD_HARNESS_DEV_VARS: devVars,
    })
    expect(refused.err).toContain('the edge refused the admin token')
  }, 30_000)

  it('retries 429 and 503 (with a note), never a 500', async () => {
    stub.faults.set('/admin/artifacts', [{ status: 429, retryAfter: '0' }, { status: 503 }])
    const run = await cli(['deploy', '--artifact', artifactA, '--target', 'prod', '--url', stub.url])
    expect(run.code, run.err).toBe(0)
    expect(run.err).toMatch(/note: POST \/admin\/artifacts answered 429; retrying in \d\.\d s \(attempt 2\)/)
    expect(run.err).toMatch(/answered 503; retrying .* \(attempt 3\)/)
    expect(stub.requests.map((request) => request.path)).toEqual([
      '/admin/artifacts',
      '/admin/artifacts',
      '/admin/artifacts',
      '/admin/targets/prod/deployments',
    ])

    stub.reset()
    stub.faults.set('/admin/targets/prod/deployments', [{ status: 500 }])
    const failed = await cli(['deployments', '--target', 'prod', '--url', stub.url, '--json'])
    expect(failed.code).toBe(1)
    expect(JSON.parse(failed.err).error).toMatchObject({ kind: 'failure', code: 'stub_500', status: 500 })
    expect(stub.requests).toHaveLength(1)
  }, 30_000)
})

describe('the admin client (in process)', () => {
  const answer = (status: number, body: unknown, headers: Record<string, string> = {}) =>
    new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } })
  const list = { target: 'prod', active_artifact_id: null, deployments: [] }

  it('retries only 429 and 503, up to maxAttempts, with exponential backoff honouring Retry-After', async () => {
    const statuses = [429, 503, 200]
    const sleeps: number[] = []
    let calls = 0
    const client = new AdminClient({
      baseUrl: 'http://edge',
      token: 't',
      fetch: async () => {
        const status = statuses[calls++]!
        return status === 200
          ? answer(200, list)
          : answer(status, { error: { code: 'busy', message: 'later' } }, status === 429 ? { 'retry-after': '3' } : {})
      },
      sleep: async (ms) => void sleeps.push(ms),
    })
    expect(await client.deployments('prod')).toEqual(list)
    expect(calls).toBe(3)
    expect(sleeps[0]).toBe(3000)
    expect(sleeps[1]).toBeGreaterThanOrEqual(0)
    expect(sleeps[1]).toBeLessThan(1000)

    let exhausted = 0
    const busy = new AdminClient({
      baseUrl: 'http://edge',
      token: 't',
      retry: { maxAttempts: 3 },
      fetch: async () => {
        exhausted++
        return answer(503, {})
      },
      sleep: async () => undefined,
    })
    const error = await busy.deployments('prod').catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(EdgeHttpError)
    expect(error).toMatchObject({ status: 503, code: 'http_503', refused: false })
    expect(exhausted).toBe(3)

    for (const status of [400, 404, 409, 500, 502]) {
      let count = 0
      const once = new AdminClient({
        baseUrl: 'http://edge',
        token: 't',
        fetch: async () => {
          count++
          return answer(status, { error: { code: 'x', message: 'm', details: [1] } })
        },
        sleep: async () => undefined,
      })
      const failure = await once.rollback('prod').catch((caught: unknown) => caught)
      expect(failure).toMatchObject({ status, code: 'x', edgeMessage: 'm', details: [1], refused: status < 500 })
      expect(count).toBe(1)
    }
  })

  it('never retries a network failure, and rejects answers that break the contract', async () => {
    let calls = 0
    const down = new AdminClient({
      baseUrl: 'http://edge',
      token: 't',
      fetch: async () => {
        calls++
        throw new TypeError('fetch failed')
      },
      sleep: async () => undefined,
    })
    expect(await down.deployments('prod').catch((caught: unknown) => caught)).toBeInstanceOf(EdgeNetworkError)
    expect(calls).toBe(1)
    const odd = new AdminClient({
      baseUrl: 'http://edge',
      token: 't',
      fetch: async () => answer(201, { deploy_id: 1 }),
    })
    expect(await odd.rollback('prod').catch((caught: unknown) => caught)).toBeInstanceOf(EdgeProtocolError)
    const html = new AdminClient({
      baseUrl: 'http://edge',
      token: 't',
      fetch: async () => new Response('<html>', { status: 200 }),
    })
    expect(String(await html.deployments('prod').catch((caught: unknown) => caught))).toContain('not JSON')
  })

  it('computes backoff, reads --llm-* flags and formats an empty history', () => {
    const policy = { ...DEFAULT_RETRY, random: () => 0.5 }
    expect(retryDelayMs(1, policy)).toBe(250)
    expect(retryDelayMs(3, policy)).toBe(1000)
    expect(retryDelayMs(10, { ...policy, random: () => 1 })).toBe(8000)
    expect(retryDelayMs(1, policy, parseRetryAfter('2'))).toBe(2000)
    expect(retryDelayMs(1, policy, parseRetryAfter('600'))).toBe(8000)
    expect(llmOf({})).toBeUndefined()
    expect(llmOf({ llmBaseUrl: 'https://x/v1/' })).toEqual({ base_url: 'https://x/v1' })
    expect(() => llmOf({ llmModel: 'm' })).toThrow('--llm-model needs --llm-base-url')
    expect(formatDeployments(list)).toBe('target prod: no active artifact, 0 deployments')
  })

  it('names who deploys: the flag, else $USER or $USERNAME, else the account running the CLI', () => {
    expect(deployedBy('ci-bot', { USER: 'alice' })).toBe('ci-bot')
    expect(deployedBy(undefined, { USER: ' alice ' })).toBe('alice')
    expect(deployedBy(undefined, { USERNAME: 'bob' })).toBe('bob')
    const account = (() => {
      try {
        return userInfo().username
      } catch {
        return undefined // a container user without a passwd entry: nobody to name
      }
    })()
    expect(deployedBy(undefined, {})).toBe(account)
    expect(deployedBy(undefined, { USER: '', USERNAME: ' ' })).toBe(account)
  })
})
