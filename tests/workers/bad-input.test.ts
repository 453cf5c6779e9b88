import { env } from 'cloudflare:workers'
import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import { createApp } from '../../workers/app.ts'
import { MAX_JSON_DEPTH } from '../../src/json-hazard/index.ts'
import { ADMIN_TOKEN, METADATA, call, createRun, ledgerRows, rollout } from './helpers.ts'

const RUBRICS = { anchor_rubrics: [{ text: 'The final answer is correct.' }] }

function expectError(res: { status: number; json: any }, status: number, code: string) {
  expect(res.status).toBe(status)
  expect(res.json.error.code).toBe(code)
  expect(res.json.error.message).toMatch(/\w{3,}/)
}

describe('bad input gets a clear 4xx and changes nothing', () => {
  it('refuses every malformed /score request and counts no rollout', async () => {
    const run = await createRun(RUBRICS)
    const score = (options: Parameters<typeof call>[2]) => call('POST', '/score', { token: run.token, ...options })

    const missing = await score({ body: { rollout: { id: 'x' } } })
    expectError(missing, 400, 'invalid_request')
    expect(missing.json.error.details.map((d: { path: string }) => d.path)).toEqual(
      expect.arrayContaining(['rollout.input', 'rollout.output', 'metadata']),
    )

    const wrongType = await score({ body: { rollout: rollout('x'), metadata: { ...METADATA, current_step: 'zero' } } })
    expectError(wrongType, 400, 'invalid_request')
    expect(wrongType.json.error.message).toContain('metadata.current_step')

    expectError(
      await score({ raw: '{"rollout": ', headers: { 'content-type': 'application/json' } }),
      400,
      'invalid_json',
    )
    expectError(
      await score({
        raw: JSON.stringify({ rollout: rollout('x'), metadata: METADATA }),
        headers: { 'content-type': 'text/plain' },
      }),
      415,
      'unsupported_media_type',
    )
    expectError(
      await score({ raw: JSON.stringify({ rollout: rollout('x'), metadata: METADATA }) }),
      415,
      'unsupported_media_type',
    )

    const huge = JSON.stringify({
      rollout: rollout('x', { output: 'y'.repeat(4 * 1024 * 1024 + 10) }),
      metadata: METADATA,
    })
    expectError(await score({ raw: huge, headers: { 'content-type': 'application/json' } }), 413, 'payload_too_large')
    // Under the body limit but over the text limit: the schema names the field.
    const long = JSON.stringify({ rollout: rollout('x', { output: 'y'.repeat(1024 * 1024 + 10) }), metadata: METADATA })
    expectError(await score({ raw: long, headers: { 'content-type': 'application/json' } }), 400, 'invalid_request')

    expectError(
      await score({ body: { rollout: rollout('x'), metadata: METADATA, instance_id: 'no spaces allowed' } }),
      400,
      'invalid_request',
    )

    expectError(
      await call('POST', '/runs/no-such-run/score', {
        token: ADMIN_TOKEN,
        body: { rollout: rollout('x'), metadata: METADATA },
      }),
      404,
      'run_not_found',
    )
    expectError(
      await call('POST', '/score', {
        token: 'rh_not-a-real-token',
        body: { rollout: rollout('x'), metadata: METADATA },
      }),
      401,
      'unauthorized',
    )
    expectError(
      await call('POST', '/score', {
        headers: { authorization: 'Basic abc' },
        body: { rollout: rollout('x'), metadata: METADATA },
      }),
      401,
      'unauthorized',
    )

    const status = await call('GET', '/rubric_status', { token: run.token })
    expect(status.json).toMatchObject({ status: 'idle', rollouts: 0 })
    expect(await ledgerRows(run.runId)).toBe(0)
  })

  it('refuses bad query parameters and unknown routes', async () => {
    expectError(await call('GET', '/rubric_status/wait?timeout_s=soon'), 400, 'invalid_request')
    expectError(await call('GET', '/rubric_status/wait?timeout_s=-1'), 400, 'invalid_request')
    expectError(await call('GET', '/rubrics?instance_id=../../etc'), 400, 'invalid_request')
    // Digits only, as every integer query parameter: Number() would read '0x10' as 16 and ' 5' as 5.
    for (const steps of ['0x10', ' 5', '1e1', '0', '201'])
      expectError(await call('GET', `/rubrics/stats?steps=${encodeURIComponent(steps)}`), 400, 'invalid_request')
    expect((await call('GET', '/rubrics/stats?steps=5')).status).toBe(200)
    // A parameter sent twice counts once, with its first value (as c.req.query reads it).
    expect((await call('GET', '/memory?limit=5&limit=nope')).status).toBe(200)
    expectError(await call('GET', '/memory?limit=nope&limit=5'), 400, 'invalid_request')
    expectError(await call('GET', '/rubrics?instance_id=other'), 404, 'not_found')
    expectError(await call('GET', '/nope'), 404, 'not_found')
  })

  it('suggests the nearest route on a 404 when one is a few edits away, and none when nothing is close', async () => {
    const cases: Array<[method: 'GET' | 'POST', path: string, suggestion: string | undefined]> = [
      ['GET', '/rubric_stats', 'GET /rubric_status or GET /rubrics/stats\\?'],
      ['GET', '/runs/default/rubricstats', 'GET /runs/default/rubrics/stats'],
      ['GET', '/rubric_statsu', 'GET /rubric_status'],
      ['GET', '/score', 'POST /score'],
      ['GET', '/rm/prod/health', 'GET /rm/prod/healthz'],
      ['GET', '/nothing-like-any-route-here', undefined],
    ]
    for (const [method, path, suggestion] of cases) {
      const res = await call(method, path, method === 'POST' ? { body: {} } : {})
      expectError(res, 404, 'not_found')
      if (suggestion) expect(res.json.error.message, path).toMatch(new RegExp(`; did you mean (.* or )?${suggestion}`))
      else expect(res.json.error.message, path).not.toContain('did you mean')
    }
  })

  it('refuses a run config that would not work, naming the field', async () => {
    const empty = await call('POST', '/runs', { token: ADMIN_TOKEN, body: { config: {} } })
    expectError(empty, 400, 'invalid_request')
    expect(empty.json.error.message).toContain('anchor_rubrics')
    const badMode = await call('POST', '/runs', { token: ADMIN_TOKEN, body: { config: { ...RUBRICS, mode: 'fast' } } })
    expectError(badMode, 400, 'invalid_request')
    expect(badMode.json.error.details[0].path).toBe('config.mode')
    expectError(
      await call('POST', '/runs', { token: ADMIN_TOKEN, body: { run_id: 'Bad Id', config: RUBRICS } }),
      400,
      'invalid_request',
    )
    expectError(
      await call('POST', '/runs', { token: ADMIN_TOKEN, body: { run_id: 'default', config: RUBRICS } }),
      409,
      'run_exists',
    )
  })
})

describe('the default run outside local development', () => {
  const production = { ...env, DEPLOYMENT: 'production' }
  const app = createApp()
  const send = async (headers: Record<string, string> = {}) => {
    const ctx = createExecutionContext()
    const response = await app.fetch(
      new Request('http://worker.test/score', {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ rollout: rollout('prod-1'), metadata: METADATA }),
      }),
      production,
      ctx,
    )
    await waitOnExecutionContext(ctx)
    return { status: response.status, json: (await response.json()) as any }
  }

  it('needs a token in production; is refused (503 no_judge_configured) while it grades with the mock', async () => {
    expectError(await send(), 401, 'unauthorized')
    const refused = await send({ authorization: `Bearer ${ADMIN_TOKEN}` })
    expectError(refused, 503, 'no_judge_configured')
    expect(refused.json.error.message).toContain('POST /runs')
  })

  it('lets an operator open a run explicitly with access: open', async () => {
    const run = await createRun({ ...RUBRICS, access: 'open' })
    const res = await call('POST', `/runs/${run.runId}/score`, {
      body: { rollout: rollout('open-1'), metadata: METADATA },
    })
    expect(res.status).toBe(200)
  })
})

describe('secrets', () => {
  it('refuses a run whose config names a secret the Worker lacks, without echoing any key', async () => {
    const res = await call('POST', '/runs', {
      token: ADMIN_TOKEN,
      body: {
        config: {
          ...RUBRICS,
          agents: { default: { backend: 'openai', base_url: 'http://127.0.0.1:9/v1', api_key_env: 'SCORER_KEY' } },
        },
      },
    })
    expectError(res, 400, 'invalid_request')
    expect(res.json.error.message).toContain('SCORER_KEY')
    expect(res.text).not.toContain(ADMIN_TOKEN)
  })

  it("refuses api_key_env naming the Worker's secrets (even listed) or unlisted names; listed ones work", async () => {
    const runWith = (name: string, role = 'scorer') =>
      call('POST', '/runs', {
        token: ADMIN_TOKEN,
        body: {
          config: {
            ...RUBRICS,
            agents: {
              [role]: { backend: 'openai', base_url: 'https://judge.example/v1', model: 'm', api_key_env: name },
            },
          },
        },
      })
    for (const own of ['ADMIN_TOKEN', 'RM_TOKEN', 'SESSION_SECRET']) {
      const res = await runWith(own)
      expectError(res, 400, 'invalid_request')
      expect(res.json.error.message).toContain(`agents.scorer.api_key_env may not name "${own}"`)
      expect(res.text).not.toContain(ADMIN_TOKEN)
    }
    const unlisted = await runWith('NOT_LISTED_KEY', 'analyzer')
    expectError(unlisted, 400, 'invalid_request')
    expect(unlisted.json.error.message).toContain('list it in the var JUDGE_KEY_NAMES')
    expect(unlisted.text).not.toContain('sk-not-listed')
    expect((await runWith('TEST_JUDGE_KEY')).status).toBe(201)
    // A deployment's llm.api_key_env follows the same rule.
    const deployed = await call('POST', '/admin/targets/keys-test/deployments', {
      token: ADMIN_TOKEN,
      body: {
        artifact_id: `rm_${'0'.repeat(64)}`,
        llm: { base_url: 'https://judge.example/v1', api_key_env: 'ADMIN_TOKEN' },
      },
    })
    expect(deployed.status).toBeGreaterThanOrEqual(400)
    expect(deployed.status).toBeLessThan(500)
    expect(deployed.text).not.toContain(ADMIN_TOKEN)
  })
})

describe('hand-picked bad input (issue 8): a 4xx naming the problem, nothing counted, nothing created', () => {
  const json = { 'content-type': 'application/json' }
  const scoreText = (rolloutJson: string, metadata = JSON.stringify(METADATA)) =>
    `{"rollout":${rolloutJson},"metadata":${metadata}}`
  const runExists = async (runId: string) =>
    (await env.DB.prepare('SELECT count(*) AS n FROM runs WHERE id = ?').bind(runId).first<{ n: number }>())?.n === 1

  it('refuses bytes that are not UTF-8 and lone surrogates, even where the body is optional', async () => {
    const run = await createRun(RUBRICS)
    const encoder = new TextEncoder()
    for (const bad of [[0xff], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xe2, 0x82]]) {
      const [head, tail] = scoreText('{"id":"u1","input":"Q BAD","output":"4"}').split('BAD') as [string, string]
      const raw = new Uint8Array([...encoder.encode(head), ...bad, ...encoder.encode(tail)])
      const res = await call('POST', '/score', { token: run.token, raw, headers: json })
      expectError(res, 400, 'invalid_json')
      expect(res.json.error.message).toContain('UTF-8')
    }
    for (const rolloutJson of [
      '{"id":"s1\\ud800","input":"Q","output":"4"}',
      '{"id":"s2","input":"Q","output":"\\udc00"}',
      '{"id":"s3","input":"Q","output":"4","metadata":{"\\ud83d":1}}',
    ]) {
      const res = await call('POST', '/score', { token: run.token, raw: scoreText(rolloutJson), headers: json })
      expectError(res, 400, 'invalid_request')
      expect(res.json.error.message).toContain('surrogate')
    }
    // A well-formed pair (an emoji written as two escapes) is fine.
    expect(
      (
        await call('POST', '/score', {
          token: run.token,
          raw: scoreText('{"id":"s4","input":"Q","output":"\\ud83d\\ude00 4"}'),
          headers: json,
        })
      ).status,
    ).toBe(200)
    // Rollback reads its (optional) body as bytes first: invalid UTF-8 there is a 400 too, not a rollback.
    expectError(
      await call('POST', '/admin/targets/hand-utf8/rollback', {
        token: ADMIN_TOKEN,
        raw: new Uint8Array([0x7b, 0xff, 0x7d]),
        headers: json,
      }),
      400,
      'invalid_json',
    )
    expect(await ledgerRows(run.runId)).toBe(1)
  })

  it(`refuses JSON nested deeper than ${MAX_JSON_DEPTH} levels wherever it hides; accepts the limit`, async () => {
    const run = await createRun(RUBRICS)
    const nested = (levels: number) => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`
    // rollout.metadata sits at depth 2, so its value may nest MAX_JSON_DEPTH - 3 more levels.
    const fits = await call('POST', '/score', {
      token: run.token,
      raw: scoreText(`{"id":"d1","input":"Q","output":"4","metadata":{"x":${nested(MAX_JSON_DEPTH - 4)}}}`),
      headers: json,
    })
    expect(fits.status, fits.text).toBe(200)
    const tooDeep = await call('POST', '/score', {
      token: run.token,
      raw: scoreText(`{"id":"d2","input":"Q","output":"4","metadata":{"x":${nested(MAX_JSON_DEPTH)}}}`),
      headers: json,
    })
    expectError(tooDeep, 400, 'invalid_request')
    expect(tooDeep.json.error.message).toContain('rollout.metadata.x')
    // Half a million levels (1 MiB of brackets) is refused as quickly, with no stack overflow anywhere.
    expectError(
      await call('POST', '/score', {
        token: run.token,
        raw: `${'['.repeat(400_000)}${']'.repeat(400_000)}`,
        headers: json,
      }),
      400,
      'invalid_request',
    )
    expectError(
      await call('POST', '/compat/slime', {
        token: run.token,
        raw: `{"prompt":"q","response":"a","label":${nested(5_000)}}`,
        headers: json,
      }),
      400,
      'invalid_request',
    )
    expectError(
      await call('POST', '/compat/openrlhf', {
        token: run.token,
        raw: `{"query":["a"],"labels":[${nested(100)}]}`,
        headers: json,
      }),
      400,
      'invalid_request',
    )
    expect(await ledgerRows(run.runId)).toBe(1)
  })

  it('refuses negative, fractional, non-numeric and infinite steps in bodies and queries', async () => {
    const run = await createRun(RUBRICS)
    for (const metadata of [
      '{"high_level_goal":"m","model_size":"7B","current_step":-1,"total_steps":10}',
      '{"high_level_goal":"m","model_size":"7B","current_step":"3","total_steps":10}',
      '{"high_level_goal":"m","model_size":"7B","current_step":1.5,"total_steps":10}',
      '{"high_level_goal":"m","model_size":"7B","current_step":1e999,"total_steps":10}',
      '{"high_level_goal":"m","model_size":"7B","current_step":0,"total_steps":0}',
      '{"high_level_goal":"m","model_size":"7B","current_step":NaN,"total_steps":10}',
    ]) {
      const res = await call('POST', '/score', {
        token: run.token,
        raw: scoreText(JSON.stringify(rollout('st')), metadata),
        headers: json,
      })
      expect(res.status, metadata).toBe(400)
      expect(['invalid_request', 'invalid_json']).toContain(res.json.error.code)
    }
    for (const step of ['-1', 'abc', '', ' 1', '0x1', '1.5', '1e3', 'Infinity']) {
      expectError(
        await call('GET', `/memory?step=${encodeURIComponent(step)}`, { token: run.token }),
        400,
        'invalid_request',
      )
    }
    for (const limit of ['0', '', '0x10', '201', '-5'])
      expectError(
        await call('GET', `/memory?limit=${encodeURIComponent(limit)}`, { token: run.token }),
        400,
        'invalid_request',
      )
    expect(await ledgerRows(run.runId)).toBe(0)
  })

  it('refuses NaN, infinite, zero and negative rubric weights, creating no run', async () => {
    for (const [label, weight] of [
      ['negative', '-1'],
      ['zero', '0'],
      ['string NaN', '"NaN"'],
      ['infinite', '1e999'],
      ['huge', '1e308'],
    ] as const) {
      const runId = `hand-weight-${label.replace(' ', '-').toLowerCase()}`
      const res = await call('POST', '/runs', {
        token: ADMIN_TOKEN,
        raw: `{"run_id":"${runId}","config":{"anchor_rubrics":[{"text":"Correct.","weight":${weight}}]}}`,
        headers: json,
      })
      expectError(res, 400, 'invalid_request')
      expect(res.json.error.details[0].path).toBe('config.anchor_rubrics.0.weight')
      expect(await runExists(runId)).toBe(false)
    }
    expectError(
      await call('POST', '/runs', {
        token: ADMIN_TOKEN,
        raw: '{"run_id":"hand-weight-nan","config":{"anchor_rubrics":[{"text":"x","weight":NaN}]}}',
        headers: json,
      }),
      400,
      'invalid_json',
    )
    expect(await runExists('hand-weight-nan')).toBe(false)
  })

  it('refuses ids that look like paths', async () => {
    expectError(
      await call('POST', '/runs', { token: ADMIN_TOKEN, body: { run_id: '../admin', config: RUBRICS } }),
      400,
      'invalid_request',
    )
    expectError(
      await call('POST', '/runs/..%2F..%2Fadmin/score', {
        token: ADMIN_TOKEN,
        body: { rollout: rollout('p1'), metadata: METADATA },
      }),
      404,
      'run_not_found',
    )
    expectError(await call('GET', '/lineage/runs/..%2F..%2Fetc', { token: ADMIN_TOKEN }), 400, 'invalid_request')
    expectError(await call('GET', '/rm/..%2Fprod/healthz'), 400, 'invalid_request')
    expectError(
      await call('GET', '/admin/targets/..%2Fprod/deployments', { token: ADMIN_TOKEN }),
      400,
      'invalid_request',
    )
    expectError(await call('GET', '/admin/artifacts/..%2F..%2Fx', { token: ADMIN_TOKEN }), 404, 'artifact_not_found')
  })

  it('refuses __proto__, constructor and prototype keys, and pollutes nothing', async () => {
    const cases = [
      [
        '/runs',
        ADMIN_TOKEN,
        '{"run_id":"hand-proto","config":{"anchor_rubrics":[{"text":"x"}],' +
          '"instance_rubrics":{"__proto__":[{"text":"y"}]}}}',
      ],
      [
        '/runs',
        ADMIN_TOKEN,
        '{"run_id":"hand-proto","config":{"anchor_rubrics":[{"text":"x"}],"prompts":{"constructor":"z"}}}',
      ],
      [
        '/runs',
        ADMIN_TOKEN,
        '{"run_id":"hand-proto","config":' +
          '{"anchor_rubrics":[{"text":"x","metadata":{"\\u005f_proto__":{"polluted":1}}}]}}',
      ],
      ['/score', undefined, scoreText('{"id":"pp","input":"Q","output":"4","metadata":{"__proto__":{"polluted":1}}}')],
      [
        '/lineage/manifests',
        ADMIN_TOKEN,
        '{"schema_version":"1.0","run_id":"hand-proto","trainer":{"name":"v"},"model":{"name":"m"},' +
          '"dataset":{"id":"d","version":"1"},"artifact_id":"a","started_at":"2026-01-01T00:00:00Z",' +
          '"config":{"prototype":{"x":1}}}',
      ],
    ] as const
    for (const [path, token, raw] of cases) {
      const res = await call('POST', path, { ...(token ? { token } : {}), raw, headers: json })
      expectError(res, 400, 'invalid_request')
      expect(res.json.error.message).toMatch(/"(__proto__|constructor|prototype)" is not allowed/)
    }
    expect(await runExists('hand-proto')).toBe(false)
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
  })

  it('serves instance ids that name Object.prototype members as ordinary instances, not as 500s', async () => {
    const run = await createRun({
      rubrics_mode: 'per_instance',
      anchor_rubrics: [{ text: 'Correct.' }],
      adaptive_rubrics: [{ id: 'steps', text: 'Shows the steps.' }],
    })
    for (const instanceId of ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf']) {
      const scored = await call('POST', '/score', {
        token: run.token,
        body: { rollout: rollout(`proto-${instanceId}`), metadata: METADATA, instance_id: instanceId },
      })
      expect(scored.status, `${instanceId}: ${scored.text}`).toBe(200)
      expect(scored.json.instance_id).toBe(instanceId)
      const rubrics = await call('GET', `/rubrics?instance_id=${instanceId}`, { token: run.token })
      expect(rubrics.status, rubrics.text).toBe(200)
      expect(rubrics.json.adaptive_rubrics.map((r: { id: string }) => r.id)).toEqual(['steps'])
      expect((await call('GET', `/rubrics/history?instance_id=${instanceId}`, { token: run.token })).status).toBe(200)
    }
  })

  it('clamps an absurd timeout to the run maximum and refuses one that is not a number', async () => {
    const run = await createRun({ ...RUBRICS, max_wait_s: 1 })
    await call('POST', '/score', { token: run.token, body: { rollout: rollout('t1'), metadata: METADATA } })
    const started = Date.now()
    const clamped = await call('GET', '/rubric_status/wait?timeout_s=1e308', { token: run.token })
    expect(clamped.status).toBe(202)
    expect(clamped.json.waited_s_max).toBe(1)
    expect(Date.now() - started).toBeLessThan(10_000)
    for (const timeout of ['', ' ', '0x10', 'Infinity', 'NaN', '1e999', '-5', '5s']) {
      expectError(
        await call('GET', `/rubric_status/wait?timeout_s=${encodeURIComponent(timeout)}`, { token: run.token }),
        400,
        'invalid_request',
      )
    }
  })
})
