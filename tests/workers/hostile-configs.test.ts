/**
 * Hostile inputs, round 4 (issue 39), in workerd: an extraction pattern past the regex budget is refused at upload
 * naming its field; literal credentials are refused in run configs, deployments, artifacts and lineage manifests, and
 * what is shown of a URL is redacted, configs stored before included; in production the server sends its keys to no
 * internal address the operator did not list.
 */
import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test'
import { env } from 'cloudflare:workers'
import { describe, expect, it, vi } from 'vitest'
import { withoutCredentials } from '../../src/credentials/index.ts'
import { OpenAIChatModel } from '../../src/llm/index.ts'
import { artifactId, RmArtifactBody } from '../../src/schemas/artifact.ts'
import { createApp } from '../../workers/app.ts'
import { ADMIN_TOKEN, answerOf, call, requestOf } from './helpers.ts'

/** This project's own run token shape, planted where a URL may carry it. */
const RH_TOKEN = `rh_${'ab12'.repeat(12)}`
const SK = 'sk-planted0123456789abcdef'

/** A valid mock-backend artifact whose prompt extraction is `pattern`. */
async function artifactWithPattern(pattern: string) {
  const body = RmArtifactBody.parse({
    schema_version: '1.0',
    kind: 'rubric',
    created_at_utc: '2026-11-22T08:00:00.000Z',
    provenance: {
      source_run_id: 'hostile',
      source_session_id: 'hostile',
      dataset_sha256: 'a'.repeat(64),
      config_hash: 'b'.repeat(64),
      settings_hash: 'c'.repeat(64),
      search_output_sha256: 'd'.repeat(64),
    },
    rubrics: { __default__: { rubric_id: 'r', criteria: [{ criterion_id: 'c', text: 'Answers the question.' }] } },
    runtime: {
      backend: 'mock',
      verifier_model: 'mock-heuristic-1',
      temperature: 0,
      max_tokens: 1024,
      seed: 7,
      locale: 'en',
      extraction: { prompt: { kind: 'regex', pattern: 'x' }, candidate: { kind: 'answer' } },
      grade_max: 10,
      allow_na: true,
      num_votes: 1,
    },
    scoring_policy: { score: 'weighted_mean_of_grades', normalization: { method: 'identity', range: [0, 1] } },
    compatibility: { artifact_type: 'rm', min_rm_api_version: '1.0' },
  })
  // Set after parsing: the schema would refuse a pattern past the budget before the upload could.
  const raw = structuredClone(body)
  raw.runtime.extraction.prompt = { kind: 'regex', pattern, join: '\n\n' }
  return { ...raw, artifact_id: await artifactId(raw) }
}

describe('the regex budget at upload', () => {
  it('refuses (.*a){1000} with 400 invalid_artifact naming runtime.extraction.prompt.pattern', async () => {
    const res = await call('POST', '/admin/artifacts', {
      token: ADMIN_TOKEN,
      body: await artifactWithPattern('(.*a){1000}'),
    })
    expect(res.status).toBe(400)
    expect(res.json.error.code).toBe('invalid_artifact')
    expect(res.json.error.details).toContainEqual({
      path: 'runtime.extraction.prompt.pattern',
      message: expect.stringMatching(/compiles to 5002 RE2 instructions; at most 100/),
    })
    const accepted = await call('POST', '/admin/artifacts', {
      token: ADMIN_TOKEN,
      body: await artifactWithPattern('(.*a){19}'),
    })
    expect([200, 201]).toContain(accepted.status)
  })
})

const RUBRICS = { anchor_rubrics: [{ text: 'Correct.' }] }

describe('literal credentials in a run config', () => {
  it.each([
    [
      'a credential-named header',
      { headers: { 'x-api-key': 'plain-value-123' } },
      'config.agents.scorer.headers.x-api-key',
    ],
    ['URL user-info', { base_url: `http://u:${SK}@judge.example/v1` }, 'config.agents.scorer.base_url'],
    ['a ?key= query', { base_url: 'http://judge.example/v1?key=abc' }, 'config.agents.scorer.base_url'],
    [
      'an rh_ token in the path',
      { base_url: `http://judge.example/t/${RH_TOKEN}/v1` },
      'config.agents.scorer.base_url',
    ],
  ])('refuses %s with 400 naming the field and the way instead', async (_what, scorer, path) => {
    const res = await call('POST', '/runs', {
      token: ADMIN_TOKEN,
      body: { config: { ...RUBRICS, agents: { scorer: { backend: 'openai', ...scorer } } } },
    })
    expect(res.status).toBe(400)
    expect(res.json.error.code).toBe('invalid_request')
    expect(res.json.error.details.map((d: { path: string }) => d.path)).toContain(path)
    expect(res.json.error.message).toMatch(/api_key_env.*\{"secret": "NAME"\}/)
    expect(res.text).not.toContain(SK)
    expect(res.text).not.toContain(RH_TOKEN)
  })

  it('takes secrets by name: api_key_env and headers {secret: NAME}', async () => {
    const res = await call('POST', '/runs', {
      token: ADMIN_TOKEN,
      body: {
        config: {
          ...RUBRICS,
          agents: { scorer: { api_key_env: 'TEST_JUDGE_KEY', headers: { 'x-api-key': { secret: 'TEST_JUDGE_KEY' } } } },
        },
      },
    })
    expect(res.status, res.text).toBe(201)
  })

  it('a config stored before the rule loads redacted and says so once in the log', async () => {
    const runId = `stored-creds-${Date.now().toString(36)}`
    const config = {
      ...RUBRICS,
      agents: {
        scorer: {
          base_url: `http://u:${SK}@judge.example/v1?key=${SK}`,
          headers: { 'x-api-key': 'plain-value-123' },
        },
      },
    }
    await env.DB.prepare('INSERT INTO runs (id, config, created_at) VALUES (?, ?, ?)')
      .bind(runId, JSON.stringify(config), new Date().toISOString())
      .run()
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {})
    try {
      const issued = await call('POST', `/runs/${runId}/tokens`, { token: ADMIN_TOKEN })
      expect(issued.status).toBe(201)
      const shown = await call('GET', `/runs/${runId}/run`, { token: issued.json.token })
      expect(shown.status).toBe(200)
      expect(shown.text).not.toContain(SK)
      expect(shown.text).not.toContain('plain-value-123')
      expect(shown.json.config.agents.scorer.base_url).toBe('http://[redacted]@judge.example/v1?key=[redacted]')
      await call('GET', `/runs/${runId}/run`, { token: issued.json.token })
      const said = warn.mock.calls.filter(([line]) => String(line).includes(runId))
      expect(said).toHaveLength(1)
      expect(String(said[0]![0])).toContain('agents.scorer.base_url')
      expect(String(said[0]![0])).not.toContain(SK)
    } finally {
      warn.mockRestore()
    }
  })

  it('a model label (what /llm_calls and the dashboard show) carries no URL credential', () => {
    const model = new OpenAIChatModel({
      baseURL: `http://u:${SK}@judge.example/t/${RH_TOKEN}/v1`,
      apiKey: 'x',
      model: 'm',
      temperature: 0,
      maxTokens: 16,
      timeoutMs: 1_000,
    })
    expect(model.id).not.toContain(SK)
    expect(model.id).not.toContain(RH_TOKEN)
    expect(model.id).toContain('judge.example')
  })
})

describe('literal credentials elsewhere', () => {
  it('a deployment whose llm.base_url carries user-info and ?key= is refused naming llm.base_url', async () => {
    const artifact = await artifactWithPattern('x')
    expect([200, 201]).toContain(
      (await call('POST', '/admin/artifacts', { token: ADMIN_TOKEN, body: artifact })).status,
    )
    const res = await call('POST', '/admin/targets/creds/deployments', {
      token: ADMIN_TOKEN,
      body: { artifact_id: artifact.artifact_id, llm: { base_url: `http://u:${SK}@host.example/v1?key=${SK}` } },
    })
    expect(res.status).toBe(400)
    expect(res.json.error.details.map((d: { path: string }) => d.path)).toEqual(['llm.base_url'])
    expect(res.text).not.toContain(SK)
  })

  it('an artifact with an rh_ token in runtime.base_url or a key in rubric text is refused', async () => {
    const raw = structuredClone(await artifactWithPattern('x'))
    raw.runtime.base_url = `http://judge.example/t/${RH_TOKEN}/v1`
    raw.rubrics.__default__!.criteria[0]!.text = 'Answers the question. glpat-abcdefghij0123456789'
    const { artifact_id: _old, ...body } = raw
    const res = await call('POST', '/admin/artifacts', {
      token: ADMIN_TOKEN,
      body: { ...body, artifact_id: await artifactId(body) },
    })
    expect(res.status).toBe(400)
    const paths = res.json.error.details.map((d: { path: string }) => d.path)
    expect(paths).toContain('runtime.base_url (path)')
    expect(paths).toContain('rubrics.__default__.criteria[0].text (inside the text)')
    expect(res.text).not.toContain(RH_TOKEN)
  })

  it('a lineage manifest with a credential in its config is refused naming the field', async () => {
    const res = await call('POST', '/lineage/manifests', {
      token: ADMIN_TOKEN,
      body: {
        schema_version: '1.0',
        run_id: 'creds-manifest',
        trainer: { name: 'verl' },
        model: { name: 'qwen' },
        dataset: { id: 'math', version: 'v1' },
        artifact_id: 'rm_x',
        started_at: '2026-01-01T00:00:00Z',
        config: { judge_url: `https://u:${SK}@judge.example/v1`, openai_api_key: SK },
      },
    })
    expect(res.status).toBe(400)
    const paths = res.json.error.details.map((d: { path: string }) => d.path)
    expect(paths).toEqual(expect.arrayContaining(['config.judge_url', 'config.openai_api_key']))
    expect(res.text).not.toContain(SK)
  })

  it('credential shapes and names import used to keep are dropped', () => {
    const { dropped } = withoutCredentials({
      gitlab: 'glpat-abcdefghij0123456789',
      stripe: 'sk_live_abcdefghij0123456789',
      groq: 'gsk_abcdefghij0123456789abcd',
      pwd: 'hunter2',
      private: 'x',
      rubric: 'Grade it. sk-abcdefghij0123456789 is the key.',
      url: `http://judge.example/t/${RH_TOKEN}/v1`,
    })
    expect(dropped).toEqual(['gitlab', 'stripe', 'groq', 'pwd', 'private', 'rubric (inside the text)', 'url (path)'])
  })
})

describe('where the server may send its keys (production)', () => {
  const app = createApp()
  const send = async (vars: Record<string, string>, method: string, path: string, body: unknown) => {
    const ctx = createExecutionContext()
    const response = await app.fetch(requestOf(method, path, { token: ADMIN_TOKEN, body }), { ...env, ...vars }, ctx)
    await waitOnExecutionContext(ctx)
    return answerOf(response)
  }
  const production = { DEPLOYMENT: 'production' }
  const runWith = (baseUrl: string) => ({
    config: { ...RUBRICS, agents: { scorer: { backend: 'openai', model: 'm', base_url: baseUrl } } },
  })

  it.each([
    'http://127.0.0.1:9/v1',
    'http://0x7f000001/v1',
    'http://2130706433/v1',
    'http://169.254.169.254/latest',
    'http://[::1]:8000/v1',
    'http://10.1.2.3/v1',
    'http://192.168.0.10/v1',
    'http://[::ffff:127.0.0.1]/v1',
    'http://localhost:8000/v1',
  ])('refuses a run whose judge is %s with 400 llm_host_not_allowed naming the field', async (url) => {
    const res = await send(production, 'POST', '/runs', runWith(url))
    expect(res.status, res.text).toBe(400)
    expect(res.json.error.code).toBe('llm_host_not_allowed')
    expect(res.json.error.message).toMatch(/^config\.agents\.scorer\.base_url: .*LLM_HOST_ALLOWLIST/)
  })

  it('takes an internal host the operator listed, and only listed hosts once the list is set', async () => {
    const listed = { ...production, LLM_HOST_ALLOWLIST: '127.0.0.1:9, *.judges.example' }
    expect((await send(listed, 'POST', '/runs', runWith('http://127.0.0.1:9/v1'))).status).toBe(201)
    expect((await send(listed, 'POST', '/runs', runWith('https://a.judges.example/v1'))).status).toBe(201)
    const off = await send(listed, 'POST', '/runs', runWith('https://api.elsewhere.example/v1'))
    expect([off.status, off.json.error.code]).toEqual([400, 'llm_host_not_allowed'])
    expect(off.json.error.message).toContain('not on this server')
    // Without a list, a public address is taken, and a name is not: a resolver may point it anywhere (issue 46).
    expect((await send(production, 'POST', '/runs', runWith('https://1.1.1.1/v1'))).status).toBe(201)
    const named = await send(production, 'POST', '/runs', runWith('https://api.openai.com/v1'))
    expect([named.status, named.json.error.code]).toEqual([400, 'llm_host_not_allowed'])
    expect(named.json.error.message).toMatch(/api\.openai\.com is a host name.*LLM_HOST_ALLOWLIST lists it/)
  })

  it('refuses to score for a run stored with an internal judge once the server runs in production', async () => {
    const created = await send({}, 'POST', '/runs', runWith('http://127.0.0.1:7/v1'))
    expect(created.status, created.text).toBe(201)
    const ctx = createExecutionContext()
    const metadata = { high_level_goal: 'math', model_size: '7B', current_step: 0, total_steps: 10 }
    const rollout = { rollout: { id: 'r1', input: 'Q', output: 'A' }, metadata }
    const response = await app.fetch(
      requestOf('POST', '/score', { token: created.json.token, body: rollout }),
      { ...env, ...production },
      ctx,
    )
    await waitOnExecutionContext(ctx)
    const scored = await answerOf(response)
    expect([scored.status, scored.json.error.code], scored.text).toEqual([400, 'llm_host_not_allowed'])
    expect(scored.json.error.message).toMatch(/^config\.agents\.scorer\.base_url: 127\.0\.0\.1/)
  })

  it('refuses a deployment to the metadata address in production; local development takes loopback', async () => {
    const artifact = await artifactWithPattern('y')
    expect([200, 201]).toContain(
      (await call('POST', '/admin/artifacts', { token: ADMIN_TOKEN, body: artifact })).status,
    )
    const body = { artifact_id: artifact.artifact_id, llm: { base_url: 'http://169.254.169.254/v1', model: 'm' } }
    const refused = await send(production, 'POST', '/admin/targets/hosts/deployments', body)
    expect([refused.status, refused.json.error.code]).toEqual([400, 'llm_host_not_allowed'])
    expect(refused.json.error.message).toMatch(/^llm\.base_url: 169\.254\.169\.254/)
    const local = await call('POST', '/admin/targets/hosts/deployments', {
      token: ADMIN_TOKEN,
      body: { ...body, llm: { base_url: 'http://127.0.0.1:9/v1', model: 'm' } },
    })
    expect(local.status).toBe(201)
  })
})
