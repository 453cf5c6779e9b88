/**
 * Tenancy (issue 8 item 3): two runs with identical rubric texts, identical scored rollouts and so identical memory
 * texts. Run B's token on run A's `/runs/A/…` prefix gets 401/403/404 and none of A's data on every run-scoped route;
 * memory retrieval under B never returns A's documents (through the API, and through one index shared by both runs as
 * Vectorize is in production); admin-only routes refuse run tokens; lineage and artifact routes keep their rules.
 */
import { env } from 'cloudflare:workers'
import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test'
import { beforeAll, describe, expect, it, vi } from 'vitest'
import { HashedNgramEmbedder } from '../../src/memory/hashed-ngram-embedder.ts'
import { ExactVectorIndex } from '../../src/memory/exact-vector-index.ts'
import { createApp } from '../../workers/app.ts'
import { MemoryStore } from '../../workers/memory/store.ts'
import { ADMIN_TOKEN, METADATA, call, createRun, ledgerRows, rollout } from './helpers.ts'

/** Both runs get exactly this config: identical rubric texts (and ids). */
const CONFIG = {
  anchor_rubrics: [{ id: 'correct', text: 'The final answer is correct.' }],
  adaptive_rubrics: [{ id: 'steps', text: 'Shows the key steps.' }],
  max_wait_s: 30,
}

/** The rollouts both runs score: same ids, same texts. */
const ROLLOUTS = [
  rollout('same-1', { output: '2 + 2 = 4' }),
  rollout('same-2', { output: 'It is 5.' }),
  rollout('same-3', {
    input: 'Capital of France?',
    output: 'Paris is the capital of France.',
    supplemental_context: 'Paris',
  }),
]

let a: { runId: string; token: string }
let b: { runId: string; token: string }
let aDocuments: { id: string; run_id: string; text: string }[]
let bDocuments: { id: string; run_id: string; text: string }[]

/** Valid requests for every run-scoped route, so a refusal can only come from the token. */
const RUN_ROUTES: { method: 'GET' | 'POST'; path: string; body?: unknown }[] = [
  { method: 'POST', path: '/score', body: { rollout: rollout('intruder-1'), metadata: METADATA } },
  { method: 'POST', path: '/complete' },
  { method: 'GET', path: '/rubric_status' },
  { method: 'GET', path: '/rubric_status/wait?timeout_s=0' },
  { method: 'GET', path: '/rubrics' },
  { method: 'GET', path: '/rubrics?history=1' },
  { method: 'GET', path: '/rubrics/history' },
  { method: 'GET', path: '/memory' },
  { method: 'GET', path: '/memory?q=correct%20answer' },
  { method: 'GET', path: '/run' },
  {
    method: 'POST',
    path: '/compat/openrlhf',
    body: { query: ['Q: 2+2? A: 4'], prompts: ['Q: 2+2? A:'], labels: ['4'] },
  },
  { method: 'POST', path: '/compat/slime', body: { prompt: 'What is 2+2?', response: '4', label: '4' } },
  { method: 'POST', path: '/score/group', body: { prompt: 'What is 2+2?', responses: ['4', '5'], reference: '4' } },
]

/** Admin-only routes with valid bodies. */
const ADMIN_ROUTES: { method: 'GET' | 'POST'; path: string; body?: unknown }[] = [
  { method: 'POST', path: '/runs', body: { run_id: 'tenancy-intruder', config: CONFIG } },
  { method: 'POST', path: '/admin/artifacts', body: {} },
  { method: 'GET', path: `/admin/artifacts/rm_${'a'.repeat(64)}` },
  { method: 'POST', path: '/admin/targets/prod/deployments', body: { artifact_id: `rm_${'a'.repeat(64)}` } },
  { method: 'POST', path: '/admin/targets/prod/rollback', body: {} },
  { method: 'GET', path: '/admin/targets/prod/deployments' },
  { method: 'GET', path: '/lineage/runs' },
]

/** What run A looks like to its own token; must not move while B knocks. */
async function stateOfA(): Promise<string> {
  const [status, rubrics, memory, events] = await Promise.all([
    call('GET', `/runs/${a.runId}/rubric_status`, { token: a.token }),
    call('GET', `/runs/${a.runId}/rubrics?history=1`, { token: a.token }),
    call('GET', `/runs/${a.runId}/memory?limit=200`, { token: a.token }),
    ledgerRows(a.runId),
  ])
  return JSON.stringify({ status: status.json, rubrics: rubrics.json, memory: memory.json, events })
}

/** A refusal that says who may call, and nothing about run A. */
function expectRefusal(res: { status: number; json: any; text: string }, statuses: number[], context: string) {
  expect(statuses, `${context} → ${res.status} ${res.text.slice(0, 200)}`).toContain(res.status)
  expect(Object.keys(res.json).sort(), context).toEqual(['error', 'request_id'])
  expect(Object.keys(res.json.error).sort(), context).toEqual(['code', 'message'])
  for (const doc of aDocuments) expect(res.text, context).not.toContain(doc.id)
  expect(res.text, context).not.toContain(a.token)
}

async function waitFor(check: () => Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  await vi.waitFor(async () => expect(await check(), `${what}: not met in ${timeoutMs} ms`).toBe(true), {
    timeout: timeoutMs,
    interval: 50,
  })
}

beforeAll(async () => {
  a = await createRun(CONFIG)
  b = await createRun(CONFIG)
  // The same rollouts in both runs, one step each, and the step's analyses, summary and rubric update in memory.
  for (const run of [a, b]) {
    for (const sample of ROLLOUTS)
      expect(
        (await call('POST', '/score', { token: run.token, body: { rollout: sample, metadata: METADATA } })).status,
      ).toBe(200)
    expect((await call('POST', '/complete', { token: run.token })).status).toBe(200)
  }
  for (const run of [a, b])
    expect((await call('GET', '/rubric_status/wait?timeout_s=30', { token: run.token })).json.status).toBe('updated')
  const memoryOf = async (run: typeof a) =>
    (await call('GET', '/memory?limit=200', { token: run.token })).json.documents as typeof aDocuments
  await waitFor(
    async () => (await memoryOf(a)).length >= ROLLOUTS.length && (await memoryOf(b)).length >= ROLLOUTS.length,
    'both runs have memory',
  )
  aDocuments = await memoryOf(a)
  bDocuments = await memoryOf(b)
}, 60_000)

describe('two runs with identical texts', () => {
  it('really are identical in what they remember, and distinct in ids', () => {
    expect(new Set(aDocuments.map((doc) => doc.run_id))).toEqual(new Set([a.runId]))
    expect(new Set(bDocuments.map((doc) => doc.run_id))).toEqual(new Set([b.runId]))
    const bTexts = new Set(bDocuments.map((doc) => doc.text))
    expect(
      aDocuments.filter((doc) => bTexts.has(doc.text)).length,
      'memory texts shared by both runs',
    ).toBeGreaterThanOrEqual(ROLLOUTS.length)
    const bIds = new Set(bDocuments.map((doc) => doc.id))
    expect(aDocuments.filter((doc) => bIds.has(doc.id))).toEqual([])
  })
})

describe("run B's token on run A", () => {
  it('is refused on every run-scoped route with 403 and none of A’s data, and A does not change', async () => {
    const before = await stateOfA()
    for (const route of RUN_ROUTES) {
      const res = await call(route.method, `/runs/${a.runId}${route.path}`, {
        token: b.token,
        ...(route.body === undefined ? {} : { body: route.body }),
      })
      expectRefusal(res, [403], `${route.method} /runs/A${route.path} with B's token`)
      expect(res.json.error.code).toBe('forbidden')
    }
    expect(await stateOfA()).toBe(before)
  })

  it('is refused the same way on a run that does not exist (no probing for run names)', async () => {
    const res = await call('GET', '/runs/no-such-run/run', { token: b.token })
    expectRefusal(res, [403], "B's token on a missing run")
  })

  it('without a token, or with a token of no run, A answers 401', async () => {
    const before = await stateOfA()
    for (const route of RUN_ROUTES) {
      for (const token of [undefined, 'rh_0123456789abcdef0123456789abcdef0123456789abcdef']) {
        const res = await call(route.method, `/runs/${a.runId}${route.path}`, {
          ...(token ? { token } : {}),
          ...(route.body === undefined ? {} : { body: route.body }),
        })
        expectRefusal(
          res,
          [401],
          `${route.method} /runs/A${route.path} with ${token ? 'an unknown token' : 'no token'}`,
        )
      }
    }
    expect(await stateOfA()).toBe(before)
  })

  it("at `/` B's token addresses B's own run, never A or the default run", async () => {
    const mine = await call('GET', '/run', { token: b.token })
    expect(mine.json.run_id).toBe(b.runId)
    expectRefusal(await call('GET', '/runs/default/run', { token: b.token }), [403], "B's token on the default run")
  })

  it('the admin token still reads A (the refusals are about B, not about the route)', async () => {
    const res = await call('GET', `/runs/${a.runId}/memory?limit=200`, { token: ADMIN_TOKEN })
    expect(res.status).toBe(200)
    expect(res.json.documents.map((doc: { id: string }) => doc.id).sort()).toEqual(
      aDocuments.map((doc) => doc.id).sort(),
    )
  })
})

describe('memory retrieval', () => {
  it("under B returns only B's documents for a query that matches A's texts exactly", async () => {
    const aIds = new Set(aDocuments.map((doc) => doc.id))
    for (const doc of aDocuments) {
      for (const path of ['/memory', `/runs/${b.runId}/memory`]) {
        const res = await call('GET', `${path}?q=${encodeURIComponent(doc.text.slice(0, 500))}&limit=200`, {
          token: b.token,
        })
        expect(res.status).toBe(200)
        expect(res.json.run_id).toBe(b.runId)
        expect(res.json.documents.length, 'the query finds B’s twin document').toBeGreaterThan(0)
        for (const hit of res.json.documents) {
          expect(hit.run_id).toBe(b.runId)
          expect(aIds.has(hit.id), `A's document ${hit.id} leaked into B's search`).toBe(false)
        }
        // The best hit is B's own copy of the same text.
        expect(res.json.documents[0].text).toBe(doc.text)
      }
    }
  })

  it('never crosses runs in one index shared by both (as Vectorize is in production)', async () => {
    const shared = new ExactVectorIndex({ dimensions: 256 })
    const embedder = new HashedNgramEmbedder({ dimensions: 256 })
    const storeFor = () => new MemoryStore(env.DB, embedder, shared)
    const text = 'The answer skipped the verification step and claimed success.'
    const doc = async (runId: string) => ({
      id: await MemoryStore.documentId('analysis', runId, 'global', 0, 'shared-index'),
      run_id: runId,
      instance_id: 'global',
      kind: 'analysis' as const,
      step: 0,
      text,
      data: { subject: 'shared-index' },
      created_at: new Date().toISOString(),
    })
    const [docA, docB] = [await doc(`${a.runId}-shared`), await doc(`${b.runId}-shared`)]
    await storeFor().put([docA, docB])
    const hits = await storeFor().search({ run_id: docB.run_id, text, top_k: 10 })
    expect(hits.map((hit) => hit.id)).toEqual([docB.id])
    expect((await storeFor().search({ run_id: docA.run_id, text, top_k: 10 })).map((hit) => hit.id)).toEqual([docA.id])
  })
})

describe('admin-only, lineage and artifact routes', () => {
  it('an Authorization scheme without token (an unset shell variable) is a 401 saying it is missing', async () => {
    for (const header of ['Bearer ', 'Bearer', 'Basic ']) {
      const res = await call('POST', '/runs', {
        headers: { authorization: header },
        body: { config: { anchor_rubrics: [{ text: 'Correct.' }] } },
      })
      expect(res.status).toBe(401)
      expect(res.json.error.message).toContain('carries no token')
    }
  })

  it('refuse run tokens (403) and anonymous callers (401) on admin-only routes', async () => {
    for (const route of ADMIN_ROUTES) {
      for (const [token, status] of [
        [a.token, 403],
        [undefined, 401],
      ] as const) {
        const res = await call(route.method, route.path, {
          ...(token ? { token } : {}),
          ...(route.body === undefined ? {} : { body: route.body }),
        })
        expectRefusal(res, [status], `${route.method} ${route.path} with ${token ? 'a run token' : 'no token'}`)
      }
    }
    expect(
      (await env.DB.prepare("SELECT count(*) AS n FROM runs WHERE id = 'tenancy-intruder'").first<{ n: number }>())?.n,
    ).toBe(0)
  })

  it("keep a training run to the run that recorded it: B can neither read nor extend A's", async () => {
    const manifest = {
      schema_version: '1.0',
      run_id: `${a.runId}.train`,
      trainer: { name: 'verl' },
      model: { name: 'qwen' },
      dataset: { id: 'math', version: 'v1' },
      artifact_id: 'rm_x',
      started_at: '2026-01-01T00:00:00Z',
    }
    expect((await call('POST', '/lineage/manifests', { token: a.token, body: manifest })).status).toBe(201)
    expect((await call('GET', `/lineage/runs/${a.runId}.train`, { token: a.token })).status).toBe(200)
    const refusals = [
      ['read the chain', await call('GET', `/lineage/runs/${a.runId}.train`, { token: b.token }), 403],
      [
        'record a result',
        await call('POST', '/lineage/results', {
          token: b.token,
          body: {
            schema_version: '1.0',
            run_id: `${a.runId}.train`,
            status: 'succeeded',
            metrics: { reward: 1 },
            finished_at: '2026-01-02T00:00:00Z',
          },
        }),
        403,
      ],
      [
        'record an eval',
        await call('POST', '/lineage/evals', {
          token: b.token,
          body: {
            schema_version: '1.0',
            eval_id: 'tenancy-eval',
            run_id: `${a.runId}.train`,
            benchmark: 'b',
            metrics: { a: 1 },
            created_at: '2026-01-02T00:00:00Z',
          },
        }),
        403,
      ],
      [
        'claim a manifest for A',
        await call('POST', '/lineage/manifests', {
          token: b.token,
          body: { ...manifest, run_id: 'tenancy-train-b', harness_run_id: a.runId },
        }),
        403,
      ],
      ['read anonymously', await call('GET', `/lineage/runs/${a.runId}.train`), 401],
    ] as const
    for (const [what, res, status] of refusals) {
      expectRefusal(res, [status], `B tries to ${what}`)
      expect(res.text).not.toContain('verl')
    }
    const chain = await call('GET', `/lineage/runs/${a.runId}.train`, { token: ADMIN_TOKEN })
    expect(chain.json.result).toBeNull()
    expect(chain.json.evals).toEqual([])
  })

  it('refuse run tokens on the RM-server surface outside local development', async () => {
    const app = createApp()
    const production = { ...env, DEPLOYMENT: 'production' }
    for (const path of ['/rm/prod/healthz', '/rm/prod/score']) {
      const ctx = createExecutionContext()
      const response = await app.fetch(
        new Request(`http://worker.test${path}`, {
          method: path.endsWith('score') ? 'POST' : 'GET',
          headers: { authorization: `Bearer ${a.token}`, 'content-type': 'application/json' },
          ...(path.endsWith('score')
            ? { body: JSON.stringify({ prompt_id: 'p', prompt: 'q', candidate: { candidate_id: 'c', text: 't' } }) }
            : {}),
        }),
        production,
        ctx,
      )
      await waitOnExecutionContext(ctx)
      const text = await response.text()
      expectRefusal(
        { status: response.status, json: JSON.parse(text), text },
        [403],
        `${path} with a run token in production`,
      )
    }
  })
})
