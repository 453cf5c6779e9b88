/**
 * Hostile inputs, round 5 (issue 46 items 4-5), in workerd: every secret the deployment holds is a credential — its
 * own token shapes (`rh_admin_…` as `npm start` writes it) and the values of its secrets (ADMIN_TOKEN, RM_TOKEN, the
 * judge keys) in any config string, artifact or lineage record, refused naming the field and never served back; and
 * the low findings: a token percent-encoded in a URL path, a credential as an object's key, `?code=`, a header value
 * with a line break, an internal address inside IPv6, an image URL with a trailing dot, a JSON login.
 */
import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import { artifactId } from '../../src/schemas/artifact.ts'
import { RequestImage } from '../../workers/artifacts/images.ts'
import { buildArtifact } from '../e2e/support/artifact.ts'
import { ADMIN_TOKEN, call, callApp } from './helpers.ts'

/** The admin token's shape, as `npm start` writes it. */
const ADMIN_SHAPED = `rh_admin_${'0a1b2c3d'.repeat(6)}`
/** An RM token as an operator may choose it: no shape of its own, only its value says what it is. */
const RM_TOKEN = 'our-rm-token-4711'
const RUBRICS = { anchor_rubrics: [{ text: 'Correct.' }] }

/** A request to the Worker with vars laid over the test's (RM_TOKEN set). */
function send(method: string, path: string, body?: unknown, vars: Record<string, string> = {}) {
  return callApp(method, path, { token: ADMIN_TOKEN, body, env: { ...env, RM_TOKEN, ...vars } })
}

/** The paths a 400 names. */
const pathsOf = (answer: { json: { error: { details?: { path: string }[] } } }) =>
  (answer.json.error.details ?? []).map((detail) => detail.path)

/** The e2e suite's small artifact, edited by `edit` and addressed anew. */
async function uploadedArtifact(edit: (body: Record<string, any>) => void = () => {}) {
  const { artifact_id: _id, ...body } = structuredClone(await buildArtifact()) as Record<string, any>
  edit(body)
  return { ...body, artifact_id: await artifactId(body as never) }
}

describe("the deployment's own secrets", () => {
  it.each([
    [
      'the admin token shape in a base_url path',
      { agents: { scorer: { base_url: `https://judge.example/t/${ADMIN_SHAPED}/v1` } } },
      'config.agents.scorer.base_url',
    ],
    [
      'the RM token in rubric text',
      { anchor_rubrics: [{ text: `Correct. Use ${RM_TOKEN}.` }] },
      'config.anchor_rubrics[0].text',
    ],
    [
      'the admin token in a harmless header',
      { agents: { scorer: { headers: { 'X-Trace': ADMIN_TOKEN } } } },
      'config.agents.scorer.headers.X-Trace',
    ],
    [
      'a judge key in an instance rubric',
      { instance_rubrics: { p1: [{ text: 'grade with sk-test-judge' }] } },
      'config.instance_rubrics.p1[0].text',
    ],
  ])('refuses %s in a run config, naming the field', async (_what, config, path) => {
    const refused = await send('POST', '/runs', { config: { ...RUBRICS, ...config } })
    expect(refused.status, refused.text).toBe(400)
    expect(pathsOf(refused)).toContain(path)
    for (const secret of [ADMIN_SHAPED, RM_TOKEN, ADMIN_TOKEN, 'sk-test-judge'])
      expect(refused.text).not.toContain(secret)
  })

  it('refuses them in a deployment, an artifact and lineage results and evals', async () => {
    const artifact = await uploadedArtifact()
    expect([200, 201]).toContain((await send('POST', '/admin/artifacts', artifact)).status)
    const deployment = await send('POST', '/admin/targets/held/deployments', {
      artifact_id: artifact.artifact_id,
      llm: { base_url: 'https://1.1.1.1/v1', model: 'm', headers: { 'X-Trace': RM_TOKEN } },
    })
    expect([deployment.status, pathsOf(deployment)]).toEqual([400, ['llm.headers.X-Trace']])
    const planted = await uploadedArtifact((body) => {
      body.rubrics.__default__.criteria[0].text = `Answers the question (${ADMIN_TOKEN}).`
    })
    const upload = await send('POST', '/admin/artifacts', planted)
    expect(upload.status).toBe(400)
    expect(pathsOf(upload)).toContain(
      'rubrics.__default__.criteria[0].text (the value of ADMIN_TOKEN, a secret of this server)',
    )
    const manifest = {
      schema_version: '1.0',
      run_id: 'held-lineage',
      trainer: { name: 'verl' },
      model: { name: 'qwen' },
      dataset: { id: 'math', version: 'v1' },
      artifact_id: 'rm_x',
      started_at: '2026-01-01T00:00:00Z',
    }
    expect([200, 201]).toContain((await send('POST', '/lineage/manifests', manifest)).status)
    const result = await send('POST', '/lineage/results', {
      schema_version: '1.0',
      run_id: 'held-lineage',
      status: 'failed',
      failure: { message: `judge refused the key sk-proj-${'x'.repeat(24)} (and ${RM_TOKEN})` },
      finished_at: '2026-01-02T00:00:00Z',
    })
    expect([result.status, pathsOf(result)]).toEqual([400, ['failure.message']])
    const jwt = `eyJ${'a'.repeat(12)}.eyJ${'b'.repeat(20)}.${'c'.repeat(16)}`
    const evalReport = await send('POST', '/lineage/evals', {
      schema_version: '1.0',
      eval_id: 'held-eval',
      run_id: 'held-lineage',
      benchmark: 'gsm8k',
      metrics: { accuracy: 0.5 },
      summary: `ran with Authorization: Bearer ${jwt}`,
      created_at: '2026-01-03T00:00:00Z',
    })
    expect([evalReport.status, pathsOf(evalReport)]).toEqual([400, ['summary']])
    expect(evalReport.text).not.toContain(jwt)
  })

  it('never serves one from a config stored before the rule (GET /run)', async () => {
    const runId = `held-stored-${Date.now().toString(36)}`
    const config = { ...RUBRICS, anchor_rubrics: [{ text: `Correct; ${RM_TOKEN}` }] }
    await env.DB.prepare('INSERT INTO runs (id, config, created_at) VALUES (?, ?, ?)')
      .bind(runId, JSON.stringify(config), new Date().toISOString())
      .run()
    const shown = await send('GET', `/runs/${runId}/run`)
    expect(shown.status, shown.text).toBe(200)
    expect(shown.text).not.toContain(RM_TOKEN)
    expect(shown.json.config.anchor_rubrics[0].text).toBe('[redacted]')
  })
})

describe('the low findings', () => {
  it('refuses a run token percent-encoded in a URL path, and ?code= and ?sig= in a query', async () => {
    for (const base_url of [
      `https://judge.example/t/rh%5f${'ab12'.repeat(12)}/v1`,
      `https://judge.example/t/sk%2D${'a'.repeat(24)}/v1`,
      'https://judge.example/v1?code=abc',
      'https://judge.example/v1?sig=abc',
    ]) {
      const refused = await send('POST', '/runs', { config: { ...RUBRICS, agents: { scorer: { base_url } } } })
      expect([refused.status, pathsOf(refused)], base_url).toEqual([400, ['config.agents.scorer.base_url']])
    }
  })

  it('refuses a credential as a key and a credential name written as one word', async () => {
    const key = `sk-proj-${'k'.repeat(24)}`
    const keyed = await send('POST', '/runs', { config: { ...RUBRICS, instance_rubrics: { [key]: [] } } })
    expect([keyed.status, pathsOf(keyed)]).toEqual([400, ['config.instance_rubrics.[redacted]']])
    expect(keyed.text).not.toContain(key)
    for (const name of ['xapikey', 'X-ApiToken', 'clientsecret', 'Authentication', 'X-Session']) {
      const named = await send('POST', '/runs', {
        config: { ...RUBRICS, agents: { scorer: { headers: { [name]: 'v-1' } } } },
      })
      expect([named.status, pathsOf(named)], name).toEqual([400, [`config.agents.scorer.headers.${name}`]])
    }
  })

  it('refuses a header value with a line break when the config is written, not at every score', async () => {
    const refused = await send('POST', '/runs', {
      config: { ...RUBRICS, agents: { scorer: { headers: { 'X-Trace': 'a\r\nX-Injected: 1' } } } },
    })
    expect(refused.status).toBe(400)
    expect(refused.json.error.message).toMatch(/no line breaks/)
  })

  it('refuses in production an internal address carried inside IPv6, and any name without an allow-list', async () => {
    const production = { DEPLOYMENT: 'production' }
    for (const base_url of [
      'http://[::127.0.0.1]/v1',
      'http://[64:ff9b::a00:1]/v1',
      'http://[2002:7f00:1::]/v1',
      'http://vm:8000/v1',
    ]) {
      const refused = await send(
        'POST',
        '/runs',
        { config: { ...RUBRICS, agents: { scorer: { base_url } } } },
        production,
      )
      expect([refused.status, refused.json.error.code], base_url).toEqual([400, 'llm_host_not_allowed'])
    }
  })

  it('refuses image URLs with trailing dots or local names', () => {
    for (const url of [
      'https://localhost./a.png',
      'https://kubernetes.default.svc./a.png',
      'https://printer.local../a',
    ])
      expect(RequestImage.safeParse({ url }).success, url).toBe(false)
    expect(RequestImage.safeParse({ url: 'https://images.example.org/a.png' }).success).toBe(true)
  })

  it("answers a JSON login's errors as JSON", async () => {
    const answer = await callApp('POST', '/dashboard/login', {
      body: { token: 'nope' },
      headers: { origin: 'http://worker.test' },
    })
    expect(answer.headers.get('content-type')).toMatch(/application\/json/)
    expect([answer.status, answer.json.error.code]).toEqual([400, 'invalid_request'])
    const wrong = await call('POST', '/dashboard/login', {
      raw: 'token=wrong-token',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        accept: 'application/json',
        origin: 'http://worker.test',
      },
    })
    expect([wrong.status, wrong.json?.error.code]).toEqual([401, 'unauthorized'])
  })
})
