import { env } from 'cloudflare:workers'
import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { artifactId, DeployRecord, RmArtifactBody, type RmArtifact } from '../../src/schemas/artifact.ts'
import { createApp } from '../../workers/app.ts'
import { SERVING_DEPLOYMENT_TTL_MS, storeArtifact } from '../../workers/artifacts/store.ts'
import { JudgeEntrypoint } from '../../workers/scoring/judge-entrypoint.ts'
import { ADMIN_TOKEN, call, createRun } from './helpers.ts'

afterEach(() => {
  vi.useRealTimers()
  vi.restoreAllMocks()
})

/** A rubric with the given criterion ids (all defaults spelled out, so the uploaded JSON is what the id hashes). */
function rubric(
  rubricId: string,
  criteria: Array<{ id: string; text: string; weight?: number; check_points?: string[] }>,
) {
  return {
    rubric_id: rubricId,
    criteria: criteria.map((criterion) => ({
      criterion_id: criterion.id,
      text: criterion.text,
      weight: criterion.weight ?? 1,
      criterion_type: null,
      check_points: criterion.check_points ?? [],
      positive_examples: [],
      negative_examples: [],
    })),
    grading_protocol: { grade_max: 10, allow_na: true, num_votes: 1 },
    metadata: {},
  }
}

const MATH_RUBRIC = rubric('r_math', [
  { id: 'math_answer', text: 'States the final answer 4.', weight: 2, check_points: ['4'] },
  { id: 'math_steps', text: 'Shows the addition step.', check_points: ['2 + 2', 'step'] },
])
const POEM_RUBRIC = rubric('r_poem', [
  { id: 'poem_imagery', text: 'Uses concrete imagery.', check_points: ['sea', 'light'] },
])
const DEFAULT_RUBRIC = rubric('r_default', [
  { id: 'default_relevant', text: 'Answers the question asked.' },
  { id: 'default_clear', text: 'Is clear and well organised.' },
])

/**
 * A valid, content-addressed artifact (mock backend) with a math and a poem rubric, plus `__default__` unless
 * `withDefault` is false; `note` makes otherwise equal artifacts distinct.
 */
async function makeArtifact(
  options: {
    note?: string
    withDefault?: boolean
    backend?: 'mock' | 'openai'
    votes?: number
    body?: (body: any) => void
  } = {},
): Promise<RmArtifact> {
  const raw: any = {
    schema_version: '1.0',
    kind: 'rubric',
    created_at_utc: '2026-11-22T08:00:00.000Z',
    provenance: {
      source_run_id: `search-${options.note ?? 'base'}`,
      source_session_id: `session-${options.note ?? 'base'}`,
      dataset_sha256: 'a'.repeat(64),
      config_hash: 'b'.repeat(64),
      settings_hash: 'c'.repeat(64),
      search_output_sha256: 'd'.repeat(64),
    },
    rubrics: {
      p_math: MATH_RUBRIC,
      p_poem: POEM_RUBRIC,
      ...(options.withDefault === false ? {} : { __default__: DEFAULT_RUBRIC }),
    },
    runtime: {
      backend: options.backend ?? 'mock',
      verifier_model: 'mock-heuristic-1',
      temperature: 0,
      max_tokens: 1024,
      seed: 7,
      locale: 'en',
      extraction: { prompt: { kind: 'identity' }, candidate: { kind: 'answer' } },
      grade_max: 10,
      allow_na: true,
      num_votes: options.votes ?? 1,
    },
    scoring_policy: { score: 'weighted_mean_of_grades', normalization: { method: 'identity', range: [0, 1] } },
    compatibility: { artifact_type: 'rm', min_rm_api_version: '1.0' },
  }
  options.body?.(raw)
  const body = RmArtifactBody.parse(raw)
  return { ...body, artifact_id: await artifactId(body) }
}

let targetCounter = 0

/** A target name no other test uses. */
function freshTarget(prefix = 't'): string {
  return `${prefix}-${Date.now().toString(36)}-${++targetCounter}`
}

const MOCK_SOLUTION = 'The sum: 2 + 2 = 4. Each step is shown.'

const upload = (artifact: unknown, token = ADMIN_TOKEN) => call('POST', '/admin/artifacts', { token, body: artifact })
const deploy = (target: string, body: Record<string, unknown>, token = ADMIN_TOKEN) =>
  call('POST', `/admin/targets/${target}/deployments`, { token, body })
const rollback = (target: string, body: Record<string, unknown> = {}, token = ADMIN_TOKEN) =>
  call('POST', `/admin/targets/${target}/rollback`, { token, body })
const history = (target: string, token = ADMIN_TOKEN) => call('GET', `/admin/targets/${target}/deployments`, { token })
const healthz = (target: string) => call('GET', `/rm/${target}/healthz`)
const score = (target: string, promptId: string, text = MOCK_SOLUTION, prompt = 'What is 2+2?') =>
  call('POST', `/rm/${target}/score`, {
    body: { prompt_id: promptId, prompt, candidate: { candidate_id: 'c1', text, source: 'verl', metadata: {} } },
  })

async function uploaded(options: Parameters<typeof makeArtifact>[0] = {}) {
  const artifact = await makeArtifact(options)
  const res = await upload(artifact)
  expect([200, 201]).toContain(res.status)
  return artifact
}

async function deployed(options: Parameters<typeof makeArtifact>[0] = {}) {
  const target = freshTarget()
  const artifact = await uploaded(options)
  expect((await deploy(target, { artifact_id: artifact.artifact_id, deployed_by: 'tester' })).status).toBe(201)
  return { target, artifact }
}

function expectError(res: { status: number; json: any }, status: number, code: string) {
  expect(res.status, JSON.stringify(res.json)).toBe(status)
  expect(res.json.error.code).toBe(code)
  expect(res.json.error.message).toMatch(/\w{3,}/)
}

describe('POST /admin/artifacts', () => {
  it('stores an artifact once: 201 stored, then 200 not stored; GET gives it back unchanged', async () => {
    const artifact = await makeArtifact({ note: 'store-once' })
    const first = await upload(artifact)
    expect(first.status).toBe(201)
    expect(first.json).toEqual({ artifact_id: artifact.artifact_id, stored: true })
    const again = await upload(artifact)
    expect(again.status).toBe(200)
    expect(again.json).toEqual({ artifact_id: artifact.artifact_id, stored: false })
    const fetched = await call('GET', `/admin/artifacts/${artifact.artifact_id}`, { token: ADMIN_TOKEN })
    expect(fetched.status).toBe(200)
    expect(fetched.json).toEqual(artifact)
    const rows = await env.DB.prepare(
      'SELECT prompt_id FROM rm_artifact_rubrics WHERE artifact_id = ? ORDER BY prompt_id',
    )
      .bind(artifact.artifact_id)
      .all<{ prompt_id: string }>()
    expect(rows.results.map((row) => row.prompt_id)).toEqual(['__default__', 'p_math', 'p_poem'])
  })

  it('refuses invalid artifacts with 400 invalid_artifact naming the fault; the active artifact stays', async () => {
    const { target, artifact } = await deployed({ note: 'validation-base' })

    const wrongVersion = await upload({ ...(await makeArtifact({ note: 'v2' })), schema_version: '2.0' })
    expectError(wrongVersion, 400, 'invalid_artifact')
    expect(wrongVersion.json.error.details).toContainEqual({
      path: 'schema_version',
      message: 'schema_version must be "1.0"',
    })

    const noRubric = await upload({ ...(await makeArtifact({ note: 'none' })), rubrics: {} })
    expectError(noRubric, 400, 'invalid_artifact')
    expect(noRubric.json.error.details.map((d: { path: string }) => d.path)).toContain('rubrics')

    const negative = structuredClone(await makeArtifact({ note: 'negative' })) as any
    negative.rubrics.p_math.criteria[0].weight = -1
    const negativeRes = await upload(negative)
    expectError(negativeRes, 400, 'invalid_artifact')
    expect(negativeRes.json.error.details.map((d: { path: string }) => d.path)).toContain(
      'rubrics.p_math.criteria.0.weight',
    )

    const tampered = structuredClone(await makeArtifact({ note: 'tampered' })) as any
    tampered.rubrics.p_math.criteria[0].text = 'Anything goes.'
    const tamperedRes = await upload(tampered)
    expectError(tamperedRes, 400, 'invalid_artifact')
    expect(tamperedRes.json.error.details[0].path).toBe('artifact_id')
    expect(tamperedRes.json.error.details[0].message).toContain('changed after export')

    const future = await upload(
      await makeArtifact({ note: 'future', body: (body) => (body.compatibility.min_rm_api_version = '2.0') }),
    )
    expectError(future, 400, 'invalid_artifact')
    expect(future.json.error.details[0].path).toBe('compatibility.min_rm_api_version')

    expectError(
      await call('POST', '/admin/artifacts', {
        token: ADMIN_TOKEN,
        raw: '{"schema_version": ',
        headers: { 'content-type': 'application/json' },
      }),
      400,
      'invalid_json',
    )

    // Nothing of the above was stored, deploying it is a 404, and the target still serves its artifact.
    expectError(await deploy(target, { artifact_id: tampered.artifact_id }), 404, 'artifact_not_found')
    const stored = await env.DB.prepare('SELECT count(*) AS n FROM rm_artifacts WHERE id = ?')
      .bind(tampered.artifact_id)
      .first<{ n: number }>()
    expect(stored?.n).toBe(0)
    expect((await healthz(target)).json.artifact_id).toBe(artifact.artifact_id)
    expect((await history(target)).json.deployments).toHaveLength(1)
  })
})

describe('deployments and the RM surface', () => {
  it('deploys: 201 DeployRecord, and healthz names the artifact as the reference server does', async () => {
    const target = freshTarget()
    const artifact = await uploaded({ note: 'health' })
    const unknown = await healthz(target)
    expectError(unknown, 404, 'target_not_found')
    expect(unknown.json.error.message).toContain(`reward-harness deploy --artifact <file> --target ${target}`)
    const res = await deploy(target, { artifact_id: artifact.artifact_id, deployed_by: 'alice' })
    expect(res.status).toBe(201)
    expect(DeployRecord.parse(res.json)).toEqual(res.json)
    expect(res.json).toMatchObject({
      target,
      artifact_id: artifact.artifact_id,
      previous_artifact_id: null,
      deployed_by: 'alice',
      action: 'deploy',
      dataset_sha256: artifact.provenance.dataset_sha256,
      config_hash: artifact.provenance.config_hash,
    })
    expect(res.json.deploy_id).toMatch(/^deploy_\w+/)
    const health = await healthz(target)
    expect(health.status).toBe(200)
    expect(health.json).toMatchObject({
      status: 'ok',
      artifact_id: artifact.artifact_id,
      source_session_id: 'session-health',
      schema_version: '1.0',
      rm_api_version: '1.0',
    })
  })

  it("scores by prompt id with that prompt's rubric, and an unseen prompt with __default__", async () => {
    const { target, artifact } = await deployed({ note: 'by-prompt' })
    const math = await score(target, 'p_math')
    expect(math.status).toBe(200)
    expect(math.json).toMatchObject({
      artifact_id: artifact.artifact_id,
      prompt_id: 'p_math',
      candidate_id: 'c1',
      rubric_id: 'r_math',
      fallback_rubric: false,
      grade_max: 10,
    })
    expect(math.json.criteria.map((c: { criterion_id: string }) => c.criterion_id)).toEqual([
      'math_answer',
      'math_steps',
    ])
    expect(Object.keys(math.json.majority_grades)).toEqual(['math_answer', 'math_steps'])
    expect(math.json.score).toBeGreaterThan(0)
    expect(math.json.score).toBeLessThanOrEqual(1)
    expect(math.json.vote_scores).toHaveLength(1)
    expect(math.json.per_vote_grades).toHaveLength(1)
    expect(math.json.request_id).toMatch(/\S+/)
    expect(typeof math.json.latency_ms).toBe('number')

    const poem = await score(target, 'p_poem', 'Light on the sea.', 'Write a line about the sea.')
    expect(poem.json.criteria.map((c: { criterion_id: string }) => c.criterion_id)).toEqual(['poem_imagery'])
    expect(poem.json.rubric_id).toBe('r_poem')

    const unseen = await score(target, 'auto')
    expect(unseen.status).toBe(200)
    expect(unseen.json).toMatchObject({ prompt_id: 'auto', rubric_id: 'r_default', fallback_rubric: true })
    expect(unseen.json.criteria.map((c: { criterion_id: string }) => c.criterion_id)).toEqual([
      'default_relevant',
      'default_clear',
    ])
  })

  it('grades a candidate the same way every time (artifact seed, temperature 0) and averages votes', async () => {
    const { target } = await deployed({ note: 'votes', votes: 3 })
    const first = await score(target, 'p_math')
    const second = await score(target, 'p_math')
    expect(first.json.score).toBe(second.json.score)
    expect(first.json.vote_scores).toHaveLength(3)
    expect(first.json.per_vote_grades).toHaveLength(3)
    const mean = first.json.vote_scores.reduce((sum: number, value: number) => sum + value, 0) / 3
    expect(first.json.variance).toBeGreaterThanOrEqual(0)
    expect(Math.abs(first.json.score - mean)).toBeLessThan(0.34)
  })

  it('answers 404 prompt_not_found only when the artifact has no __default__ rubric', async () => {
    const { target } = await deployed({ note: 'no-default', withDefault: false })
    const missing = await score(target, 'p_unknown')
    expectError(missing, 404, 'prompt_not_found')
    expect(missing.json.error.message).toContain('p_unknown')
    expect((await score(target, 'p_math')).status).toBe(200)
  })

  it('batch_score: one failing item never fails the batch', async () => {
    const { target, artifact } = await deployed({ note: 'batch', withDefault: false })
    const good = {
      prompt_id: 'p_math',
      prompt: 'What is 2+2?',
      candidate: { candidate_id: 'good', text: MOCK_SOLUTION, source: 'verl' },
    }
    const res = await call('POST', `/rm/${target}/batch_score`, {
      body: {
        items: [
          good,
          { ...good, prompt_id: 'p_unknown', candidate: { candidate_id: 'lost', text: 'x' } },
          { prompt_id: 'p_math', candidate: 'not an object' },
          { ...good, candidate: { candidate_id: 'second', text: '5' } },
        ],
      },
    })
    expect(res.status).toBe(200)
    expect(res.json.artifact_id).toBe(artifact.artifact_id)
    expect(res.json.request_id).toMatch(/\S+/)
    const [ok, missing, malformed, other] = res.json.results
    expect(res.json.results.map((r: { index: number }) => r.index)).toEqual([0, 1, 2, 3])
    expect(ok).toMatchObject({ index: 0, ok: true, prompt_id: 'p_math', candidate_id: 'good', rubric_id: 'r_math' })
    expect(ok.score).toBe((await score(target, 'p_math')).json.score)
    expect(missing).toMatchObject({
      index: 1,
      ok: false,
      prompt_id: 'p_unknown',
      candidate_id: 'lost',
      error_code: 'prompt_not_found',
    })
    expect(malformed).toMatchObject({
      index: 2,
      ok: false,
      prompt_id: 'p_math',
      candidate_id: null,
      error_code: 'invalid_request',
    })
    expect(other).toMatchObject({ index: 3, ok: true, candidate_id: 'second' })
    expect(other.score).toBeLessThan(ok.score)
  })

  it('batch_score of 60 items: chunks handed to other invocations, in order, each as /score scores it', async () => {
    const { target } = await deployed({ note: 'batch-60', withDefault: false })
    const items = Array.from({ length: 60 }, (_, i) =>
      i === 30
        ? { prompt_id: 'p_math', candidate: 'not an object' }
        : {
            prompt_id: 'p_math',
            prompt: 'What is 2+2?',
            candidate: { candidate_id: `c${i}`, text: i % 2 ? MOCK_SOLUTION : `${i}` },
          },
    )
    // Each chunk reaches the JUDGE entrypoint as an invocation of its own (the binding calls into this isolate).
    const chunks = vi.spyOn(JudgeEntrypoint.prototype, 'scoreRm')
    const res = await call('POST', `/rm/${target}/batch_score`, { body: { items } })
    expect(res.status, res.text.slice(0, 300)).toBe(200)
    // 60 items, 24 scored per invocation: 2 chunks of 30, both scored by other invocations (arriving in any order).
    const handedOut = chunks.mock.calls.map(([chunk]) => chunk.items.map(({ index }) => index))
    expect(handedOut.sort((a, b) => a[0]! - b[0]!)).toEqual([
      items.slice(0, 30).map((_, i) => i),
      items.slice(30).map((_, i) => 30 + i),
    ])
    expect(res.json.results.map((r: { index: number }) => r.index)).toEqual(items.map((_, i) => i))
    expect(res.json.results[30]).toMatchObject({ ok: false, error_code: 'invalid_request' })
    const alone = (await score(target, 'p_math')).json.score
    for (const [i, result] of res.json.results.entries()) {
      if (i === 30) continue
      expect(result).toMatchObject({ ok: true, candidate_id: `c${i}` })
      if (i % 2) expect(result.score).toBe(alone)
    }
  })

  it('batch_score: a chunk whose invocation failed is scored here, each item once, as the others', async () => {
    const { target } = await deployed({ note: 'batch-lost-chunk', withDefault: false })
    const items = Array.from({ length: 48 }, (_, i) => ({
      prompt_id: 'p_math',
      prompt: 'What is 2+2?',
      candidate: { candidate_id: `c${i}`, text: i % 2 ? MOCK_SOLUTION : `${i}` },
    }))
    const unfaulted = await call('POST', `/rm/${target}/batch_score`, { body: { items } })
    expect(unfaulted.status, unfaulted.text.slice(0, 300)).toBe(200)
    const chunks = vi.spyOn(JudgeEntrypoint.prototype, 'scoreRm').mockRejectedValueOnce(new Error('invocation lost'))
    const res = await call('POST', `/rm/${target}/batch_score`, { body: { items } })
    expect(res.status, res.text.slice(0, 300)).toBe(200)
    expect(chunks.mock.calls.map(([chunk]) => chunk.items.length)).toEqual([24, 24])
    const comparable = (results: any[]) => results.map(({ latency_ms, ...rest }) => rest)
    expect(comparable(res.json.results)).toEqual(comparable(unfaulted.json.results))
    expect(res.json.results.map((r: { candidate_id: string }) => r.candidate_id)).toEqual(
      items.map(({ candidate }) => candidate.candidate_id),
    )
  })

  it('deploy records the previous artifact; rollback re-activates it at once, recorded; newest first', async () => {
    const target = freshTarget()
    const first = await uploaded({ note: 'first' })
    const second = await uploaded({ note: 'second' })
    const d1 = await deploy(target, { artifact_id: first.artifact_id })
    const d2 = await deploy(target, { artifact_id: second.artifact_id, deployed_by: 'bob' })
    expect(d2.json).toMatchObject({
      artifact_id: second.artifact_id,
      previous_artifact_id: first.artifact_id,
      action: 'deploy',
    })
    expect((await healthz(target)).json.artifact_id).toBe(second.artifact_id)
    expect((await score(target, 'p_math')).json.artifact_id).toBe(second.artifact_id)

    const back = await rollback(target, { deployed_by: 'carol' })
    expect(back.status).toBe(201)
    expect(back.json).toMatchObject({
      target,
      artifact_id: first.artifact_id,
      previous_artifact_id: second.artifact_id,
      action: 'rollback',
      deployed_by: 'carol',
    })
    expect((await healthz(target)).json.artifact_id).toBe(first.artifact_id)
    expect((await score(target, 'p_math')).json.artifact_id).toBe(first.artifact_id)

    const listed = await history(target)
    expect(listed.status).toBe(200)
    expect(listed.json.target).toBe(target)
    expect(listed.json.active_artifact_id).toBe(first.artifact_id)
    expect(listed.json.deployments.map((d: { deploy_id: string }) => d.deploy_id)).toEqual([
      back.json.deploy_id,
      d2.json.deploy_id,
      d1.json.deploy_id,
    ])
    expect(listed.json.deployments[0]).toEqual(back.json)
    expect(listed.json.deployments.map((d: { action: string }) => d.action)).toEqual(['rollback', 'deploy', 'deploy'])

    // A second rollback undoes the first (the rollback's previous artifact is the one rolled back from).
    expect((await rollback(target)).json).toMatchObject({
      artifact_id: second.artifact_id,
      previous_artifact_id: first.artifact_id,
      deployed_by: 'unknown',
    })
    // An empty body is a valid rollback request too.
    const bare = await call('POST', `/admin/targets/${target}/rollback`, { token: ADMIN_TOKEN })
    expect(bare.status).toBe(201)
    expect(bare.json.artifact_id).toBe(first.artifact_id)
  })

  it('a deploy made elsewhere (another isolate) is served within SERVING_DEPLOYMENT_TTL_MS, not at once', async () => {
    const target = freshTarget()
    const first = await uploaded({ note: 'cached-first' })
    const second = await uploaded({ note: 'cached-second' })
    await deploy(target, { artifact_id: first.artifact_id })
    // A clock this test moves: whatever this isolate read before is stale at `readAt`, so healthz reads D1 then.
    vi.useFakeTimers({ toFake: ['Date'] })
    const readAt = Date.now() + SERVING_DEPLOYMENT_TTL_MS
    vi.setSystemTime(readAt)
    expect((await healthz(target)).json.artifact_id).toBe(first.artifact_id)
    // Another isolate's deploy: a row this isolate did not write, so nothing here forgets its cached deployment.
    await env.DB.prepare(
      `INSERT INTO rm_deployments (deploy_id, target, artifact_id, previous_artifact_id, deployed_by, deployed_at,
         action, dataset_sha256, config_hash, llm) VALUES (?1, ?2, ?3, ?4, 'elsewhere', ?5, 'deploy', ?6, ?7, NULL)`,
    )
      .bind(
        `deploy_elsewhere_${target}`,
        target,
        second.artifact_id,
        first.artifact_id,
        new Date().toISOString(),
        second.provenance.dataset_sha256,
        second.provenance.config_hash,
      )
      .run()
    // This isolate's read of the first deployment is `readAt` old: on the edge of the TTL it is still served.
    vi.setSystemTime(readAt + SERVING_DEPLOYMENT_TTL_MS - 1)
    expect((await score(target, 'p_math')).json.artifact_id).toBe(first.artifact_id)
    expect((await healthz(target)).json.artifact_id).toBe(first.artifact_id)
    vi.setSystemTime(readAt + SERVING_DEPLOYMENT_TTL_MS)
    expect((await healthz(target)).json.artifact_id).toBe(second.artifact_id)
    expect((await score(target, 'p_math')).json.artifact_id).toBe(second.artifact_id)
  })

  it('re-deploying the active artifact keeps its previous artifact, so rollback still works', async () => {
    const target = freshTarget()
    const first = await uploaded({ note: 'redeploy-1' })
    const second = await uploaded({ note: 'redeploy-2' })
    await deploy(target, { artifact_id: first.artifact_id })
    await deploy(target, { artifact_id: second.artifact_id })
    const again = await deploy(target, { artifact_id: second.artifact_id })
    expect(again.json).toMatchObject({ artifact_id: second.artifact_id, previous_artifact_id: first.artifact_id })
    expect((await rollback(target)).json.artifact_id).toBe(first.artifact_id)
  })

  it('rolls back to the previous deployment: a redeploy with a bad judge goes back to the judge before', async () => {
    const target = freshTarget()
    const artifact = await uploaded({ note: 'bad-judge' })
    await deploy(target, { artifact_id: artifact.artifact_id })
    const badJudge = { base_url: 'http://127.0.0.1:9/v1', model: 'bad-judge' }
    expect((await deploy(target, { artifact_id: artifact.artifact_id, llm: badJudge })).status).toBe(201)
    expect((await healthz(target)).json.judge).toMatchObject({ backend: 'openai', model: 'bad-judge' })
    expectError(await score(target, 'p_math'), 503, 'llm_unavailable')

    const back = await rollback(target)
    expect(back.status, JSON.stringify(back.json)).toBe(201)
    expect(back.json).toMatchObject({ artifact_id: artifact.artifact_id, action: 'rollback' })
    expect((await healthz(target)).json.judge.backend).toBe('mock')
    expect((await score(target, 'p_math')).status).toBe(200)
    // And a second rollback undoes it: the bad judge again.
    expect((await rollback(target)).status).toBe(201)
    expect((await healthz(target)).json.judge).toMatchObject({ model: 'bad-judge' })
  })

  it('409 nothing_to_roll_back on a fresh target and after a first deployment, changing nothing', async () => {
    const target = freshTarget()
    expectError(await rollback(target), 409, 'nothing_to_roll_back')
    const artifact = await uploaded({ note: 'single' })
    await deploy(target, { artifact_id: artifact.artifact_id })
    expectError(await rollback(target), 409, 'nothing_to_roll_back')
    expect((await history(target)).json.deployments).toHaveLength(1)
    expect((await healthz(target)).json.artifact_id).toBe(artifact.artifact_id)
  })

  it('lists an unknown target as empty, and refuses bad target names', async () => {
    const target = freshTarget()
    expect((await history(target)).json).toEqual({ target, active_artifact_id: null, deployments: [] })
    expectError(await history('Bad_Target'), 400, 'invalid_request')
    expectError(await deploy('-leading-dash', { artifact_id: 'rm_x' }), 400, 'invalid_request')
    expectError(await healthz('UPPER'), 400, 'invalid_request')
  })
})

describe('openai-backend artifacts', () => {
  it('refuses to deploy without an endpoint (400 llm_not_configured) and the active artifact stays', async () => {
    const { target, artifact } = await deployed({ note: 'before-openai' })
    const remote = await uploaded({ note: 'openai', backend: 'openai' })
    const res = await deploy(target, { artifact_id: remote.artifact_id })
    expectError(res, 400, 'llm_not_configured')
    expect(res.json.error.message).toContain('RM_LLM_BASE_URL')
    expectError(
      await deploy(target, {
        artifact_id: remote.artifact_id,
        llm: { base_url: 'http://127.0.0.1:9/v1', api_key_env: 'NO_SUCH_SECRET' },
      }),
      400,
      'llm_not_configured',
    )
    expectError(
      await deploy(target, { artifact_id: remote.artifact_id, llm: { base_url: 'not a url' } }),
      400,
      'invalid_request',
    )
    // Header secrets follow the api_key_env rule: never the Worker's own secrets.
    const ownSecret = await deploy(target, {
      artifact_id: remote.artifact_id,
      llm: { base_url: 'https://judge.example/v1', headers: { 'CF-Access-Client-Secret': { secret: 'ADMIN_TOKEN' } } },
    })
    expectError(ownSecret, 400, 'llm_not_configured')
    expect(ownSecret.json.error.message).toContain('may not name "ADMIN_TOKEN"')
    expect(ownSecret.text).not.toContain(ADMIN_TOKEN)
    expect((await healthz(target)).json.artifact_id).toBe(artifact.artifact_id)
    expect((await history(target)).json.deployments).toHaveLength(1)
  })

  it('reports a model that cannot be reached as llm_unavailable, never as a score of 0', async () => {
    const target = freshTarget()
    const remote = await uploaded({ note: 'unreachable', backend: 'openai' })
    expect(
      (
        await deploy(target, {
          artifact_id: remote.artifact_id,
          llm: { base_url: 'http://127.0.0.1:9/v1', model: 'judge' },
        })
      ).status,
    ).toBe(201)
    const single = await score(target, 'p_math')
    expectError(single, 503, 'llm_unavailable')
    expect(single.json.score).toBeUndefined()
    const batch = await call('POST', `/rm/${target}/batch_score`, {
      body: { items: [{ prompt_id: 'p_math', prompt: 'Q', candidate: { candidate_id: 'c', text: 'A' } }] },
    })
    expect(batch.status).toBe(200)
    expect(batch.json.results[0]).toMatchObject({ index: 0, ok: false, error_code: 'llm_unavailable' })
    expect(batch.json.results[0].score).toBeUndefined()
  })
})

describe('one judge for an artifact, chosen at deploy', () => {
  it('a mock artifact deployed without a judge says so on healthz and in every score', async () => {
    const { target } = await deployed({ note: 'mock-named' })
    const mock = { backend: 'mock', model: 'mock-heuristic-1', note: expect.stringMatching(/not a judge/) }
    expect((await healthz(target)).json.judge).toEqual(mock)
    const single = await score(target, 'p_math')
    expect(single.status).toBe(200)
    expect(single.json.judge).toEqual(mock)
    const batch = await call('POST', `/rm/${target}/batch_score`, {
      body: { items: [{ prompt_id: 'p_math', prompt: 'Q', candidate: { candidate_id: 'c', text: 'A' } }] },
    })
    expect(batch.json).toMatchObject({ judge: mock, results: [{ ok: true }] })
  })

  it('a mock artifact deployed with a judge scores with that judge (never the mock), and needs its model', async () => {
    const target = freshTarget()
    const artifact = await uploaded({ note: 'mock-with-judge' })
    expectError(
      await deploy(target, { artifact_id: artifact.artifact_id, llm: { base_url: 'http://127.0.0.1:9/v1' } }),
      400,
      'llm_not_configured',
    )
    const llm = { base_url: 'http://127.0.0.1:9/v1', model: 'qwen-judge' }
    const res = await deploy(target, { artifact_id: artifact.artifact_id, llm })
    expect(res.status).toBe(201)
    expect((await healthz(target)).json.judge).toEqual({
      backend: 'openai',
      model: 'qwen-judge',
      base_url: 'http://127.0.0.1:9/v1',
    })
    // Nothing listens on port 9: the score fails as the judge's failure, where the mock would have answered 200.
    expectError(await score(target, 'p_math'), 503, 'llm_unavailable')
    const recorded = await env.DB.prepare('SELECT llm FROM rm_deployments WHERE target = ?')
      .bind(target)
      .first<{ llm: string }>()
    expect(JSON.parse(recorded!.llm)).toEqual(llm)
  })
})

describe('images', () => {
  it('a rubric artifact grades text only: a request with images is refused (400), not scored without', async () => {
    const { target } = await deployed({ note: 'images' })
    const body = { prompt_id: 'p_math', prompt: 'What is 2+2?', candidate: { candidate_id: 'c1', text: MOCK_SOLUTION } }
    for (const images of [
      { images: [{ url: 'https://images.example/sum.png' }] },
      { reference_images: [{ url: 'https://images.example/ref.png' }] },
    ]) {
      const refused = await call('POST', `/rm/${target}/score`, { body: { ...body, ...images } })
      expectError(refused, 400, 'invalid_request')
      expect(refused.json.error.message).toMatch(/rubric artifact: its verifier grades text only/)
    }
    const candidateImages = await call('POST', `/rm/${target}/batch_score`, {
      body: {
        items: [{ ...body, candidate: { ...body.candidate, images: [{ url: 'https://images.example/c.png' }] } }, body],
      },
    })
    expect(
      candidateImages.json.results.map((result: { ok: boolean; error_code?: string }) => [
        result.ok,
        result.error_code,
      ]),
    ).toEqual([
      [false, 'invalid_request'],
      [true, undefined],
    ])
  })
})

describe('who may call', () => {
  it('refuses run tokens on every admin route (403) and anonymous callers (401)', async () => {
    const run = await createRun({ anchor_rubrics: [{ text: 'Correct.' }] })
    const artifact = await makeArtifact({ note: 'run-token' })
    const target = freshTarget()
    for (const res of [
      await upload(artifact, run.token),
      await deploy(target, { artifact_id: artifact.artifact_id }, run.token),
      await rollback(target, {}, run.token),
      await history(target, run.token),
      await call('GET', `/admin/artifacts/${artifact.artifact_id}`, { token: run.token }),
    ]) {
      expectError(res, 403, 'forbidden')
    }
    expectError(await call('POST', '/admin/artifacts', { body: artifact }), 401, 'unauthorized')
    expect(
      (
        await env.DB.prepare('SELECT count(*) AS n FROM rm_artifacts WHERE id = ?')
          .bind(artifact.artifact_id)
          .first<{ n: number }>()
      )?.n,
    ).toBe(0)
  })

  it('in production, /rm/* takes the RM token or the admin token, not a run token or nobody', async () => {
    const { target } = await deployed({ note: 'production' })
    const run = await createRun({ anchor_rubrics: [{ text: 'Correct.' }] })
    const production = { ...env, DEPLOYMENT: 'production', RM_TOKEN: 'rm-secret-token' }
    const app = createApp()
    const send = async (path: string, token?: string) => {
      const ctx = createExecutionContext()
      const response = await app.fetch(
        new Request(`http://worker.test${path}`, { headers: token ? { authorization: `Bearer ${token}` } : {} }),
        production,
        ctx,
      )
      await waitOnExecutionContext(ctx)
      return { status: response.status, json: (await response.json()) as any }
    }
    expectError(await send(`/rm/${target}/healthz`), 401, 'unauthorized')
    expectError(await send(`/rm/${target}/healthz`, run.token), 403, 'forbidden')
    const wrong = await send(`/rm/${target}/healthz`, 'not-the-rm-token')
    expectError(wrong, 401, 'unauthorized')
    // /rm takes no run tokens, so the refusal does not talk about runs; it says which tokens would do.
    expect(wrong.json.error.message).not.toMatch(/any run/)
    expect(wrong.json.error.message).toContain('RM token')
    expect((await send(`/rm/${target}/healthz`, 'rm-secret-token')).status).toBe(200)
    expect((await send(`/rm/${target}/healthz`, ADMIN_TOKEN)).status).toBe(200)
    // The RM token opens /rm/* only.
    expectError(await send(`/admin/targets/${target}/deployments`, 'rm-secret-token'), 403, 'forbidden')
    expect((await send(`/admin/targets/${target}/deployments`, ADMIN_TOKEN)).status).toBe(200)
  })

  it('a token the isolate already knows counts only under the secrets it was checked with', async () => {
    const { target } = await deployed({ note: 'rotated' })
    const app = createApp()
    const send = async (secrets: { ADMIN_TOKEN: string; RM_TOKEN?: string }, path: string, token: string) => {
      const ctx = createExecutionContext()
      const response = await app.fetch(
        new Request(`http://worker.test${path}`, { headers: { authorization: `Bearer ${token}` } }),
        { ...env, DEPLOYMENT: 'production', ...secrets },
        ctx,
      )
      await waitOnExecutionContext(ctx)
      return { status: response.status, json: (await response.json()) as any }
    }
    // Known as the admin token, then as the RM token, then as nothing once both secrets were rotated.
    expect((await send({ ADMIN_TOKEN: 'old-admin' }, `/admin/targets/${target}/deployments`, 'old-admin')).status).toBe(
      200,
    )
    expect((await send({ ADMIN_TOKEN: 'old-admin' }, `/admin/targets/${target}/deployments`, 'old-admin')).status).toBe(
      200,
    ) // now from the cache
    // A refused token is never remembered: refused twice, then accepted once it is the admin token.
    expectError(
      await send({ ADMIN_TOKEN: 'old-admin' }, `/admin/targets/${target}/deployments`, 'not-a-token'),
      401,
      'unauthorized',
    )
    expectError(
      await send({ ADMIN_TOKEN: 'old-admin' }, `/admin/targets/${target}/deployments`, 'not-a-token'),
      401,
      'unauthorized',
    )
    expect(
      (await send({ ADMIN_TOKEN: 'not-a-token' }, `/admin/targets/${target}/deployments`, 'not-a-token')).status,
    ).toBe(200)
    expectError(
      await send(
        { ADMIN_TOKEN: 'new-admin', RM_TOKEN: 'old-admin' },
        `/admin/targets/${target}/deployments`,
        'old-admin',
      ),
      403,
      'forbidden',
    )
    expect(
      (await send({ ADMIN_TOKEN: 'new-admin', RM_TOKEN: 'old-admin' }, `/rm/${target}/healthz`, 'old-admin')).status,
    ).toBe(200)
    expectError(
      await send({ ADMIN_TOKEN: 'new-admin', RM_TOKEN: 'new-rm' }, `/rm/${target}/healthz`, 'old-admin'),
      401,
      'unauthorized',
    )
    expectError(
      await send({ ADMIN_TOKEN: 'new-admin', RM_TOKEN: 'new-rm' }, `/admin/targets/${target}/deployments`, 'old-admin'),
      401,
      'unauthorized',
    )
  })
})

describe('credentials in uploaded artifacts', () => {
  const PLANTED = ['planted-password-hunter2', 'Bearer planted-bearer-41d2e8b7', 'sk-planted-userinfo-0123456789abcdef']
  const plant = (body: any) => {
    body.rubrics.p_math.metadata = { password: PLANTED[0], headers: { Authorization: PLANTED[1] } }
    body.runtime.base_url = `https://user:${PLANTED[2]}@judge.example.com/v1`
  }

  it('refuses an artifact carrying credentials, naming where and echoing none', async () => {
    const res = await upload(await makeArtifact({ note: 'planted', body: plant }))
    expectError(res, 400, 'invalid_artifact')
    expect(res.json.error.details.map((problem: { path: string }) => problem.path)).toEqual([
      'rubrics.p_math.metadata.password',
      'rubrics.p_math.metadata.headers.Authorization',
      'runtime.base_url (user-info)',
    ])
    for (const value of PLANTED) expect(res.text).not.toContain(value)
  })

  it('the admin view never serves a credential an older Worker stored', async () => {
    const artifact = await makeArtifact({ note: 'stored-before', body: plant })
    await storeArtifact(env.DB, artifact)
    const res = await call('GET', `/admin/artifacts/${artifact.artifact_id}`, { token: ADMIN_TOKEN })
    expect(res.status).toBe(200)
    expect(res.json.rubrics.p_math.rubric_id).toBe('r_math')
    expect(res.json.runtime.base_url).toBe('https://judge.example.com/v1')
    for (const value of PLANTED) expect(res.text).not.toContain(value)
  })
})
