/**
 * The edge lineage API: record a manifest, a result and an eval, read back the chain with the deployment joined from
 * rm_deployments; run tokens are scoped to their own training runs; bad input is a 400 naming the field.
 */
import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import { ADMIN_TOKEN, call, createRun } from './helpers.ts'

const ARTIFACT = `rm_${'b'.repeat(64)}`
const DEPLOY = 'dep_lineage_test'

async function plantDeployment() {
  await env.DB.prepare(`INSERT OR IGNORE INTO rm_artifacts (id, schema_version, source_run_id, source_session_id,
      dataset_sha256, config_hash, backend, rubric_count, created_at_utc, meta, stored_at)
    VALUES (?, '1.0', 'src', 'sess', 'ds', 'cfg', 'mock', 1, '2026-01-01T00:00:00Z', '{}', '2026-01-01T00:00:00Z')`)
    .bind(ARTIFACT)
    .run()
  await env.DB.prepare(`INSERT OR IGNORE INTO rm_deployments (deploy_id, target, artifact_id, previous_artifact_id,
      deployed_by, deployed_at, action, dataset_sha256, config_hash)
    VALUES (?, 'prod', ?, NULL, 'tester', '2026-01-01T01:00:00Z', 'deploy', 'ds', 'cfg')`)
    .bind(DEPLOY, ARTIFACT)
    .run()
}

const manifest = (runId: string, extra: Record<string, unknown> = {}) => ({
  schema_version: '1.0',
  run_id: runId,
  trainer: { name: 'verl' },
  model: { name: 'qwen-7b' },
  dataset: { id: 'math', version: 'v3' },
  artifact_id: ARTIFACT,
  deploy_id: DEPLOY,
  target: 'prod',
  started_at: '2026-01-02T00:00:00Z',
  ...extra,
})

describe('/lineage', () => {
  it('records a manifest, result and eval and reads back the chain with the deployment', async () => {
    await plantDeployment()
    const created = await call('POST', '/lineage/manifests', { token: ADMIN_TOKEN, body: manifest('edge-1') })
    expect(created.status).toBe(201)
    expect((await call('POST', '/lineage/manifests', { token: ADMIN_TOKEN, body: manifest('edge-1') })).status).toBe(
      200,
    )
    expect(
      (
        await call('POST', '/lineage/manifests', {
          token: ADMIN_TOKEN,
          body: manifest('edge-1', { started_at: '2026-01-03T00:00:00Z' }),
        })
      ).status,
    ).toBe(409)
    expect(
      (
        await call('POST', '/lineage/results', {
          token: ADMIN_TOKEN,
          body: {
            schema_version: '1.0',
            run_id: 'edge-1',
            status: 'succeeded',
            metrics: { reward: 0.5 },
            finished_at: '2026-01-03T00:00:00Z',
          },
        })
      ).status,
    ).toBe(201)
    expect(
      (
        await call('POST', '/lineage/evals', {
          token: ADMIN_TOKEN,
          body: {
            schema_version: '1.0',
            eval_id: 'edge-1-gsm8k',
            run_id: 'edge-1',
            benchmark: 'gsm8k',
            metrics: { accuracy: 0.8 },
            created_at: '2026-01-04T00:00:00Z',
          },
        })
      ).status,
    ).toBe(201)
    const chain = await call('GET', '/lineage/runs/edge-1', { token: ADMIN_TOKEN })
    expect(chain.status).toBe(200)
    expect(chain.json).toMatchObject({
      run_id: 'edge-1',
      artifact_id: ARTIFACT,
      deploy_id: DEPLOY,
      deployment: { deploy_id: DEPLOY, target: 'prod', artifact_id: ARTIFACT, action: 'deploy' },
      result: { status: 'succeeded' },
      evals: [{ benchmark: 'gsm8k', metrics: { accuracy: 0.8 } }],
    })
    const listed = await call('GET', `/lineage/runs?artifact_id=${ARTIFACT}&status=succeeded`, {
      token: ADMIN_TOKEN,
    })
    expect(listed.json.runs.map((r: { run_id: string }) => r.run_id)).toContain('edge-1')
    expect((await call('GET', '/lineage/runs/nothing-here', { token: ADMIN_TOKEN })).status).toBe(404)
  })

  it('scopes run tokens to the training runs of their run', async () => {
    const mine = await createRun({ anchor_rubrics: [{ text: 'Correct.' }] })
    const other = await createRun({ anchor_rubrics: [{ text: 'Correct.' }] })
    const edgeMine = `${mine.runId}.edge-mine`
    const recorded = await call('POST', '/lineage/manifests', { token: mine.token, body: manifest(edgeMine) })
    expect(recorded.status).toBe(201)
    const chain = await call('GET', `/lineage/runs/${edgeMine}`, { token: mine.token })
    expect(chain.status).toBe(200)
    expect(chain.json.manifest.harness_run_id).toBe(mine.runId)
    expect((await call('GET', `/lineage/runs/${edgeMine}`, { token: other.token })).status).toBe(403)
    expect(
      (
        await call('POST', '/lineage/evals', {
          token: other.token,
          body: {
            schema_version: '1.0',
            eval_id: 'x',
            run_id: edgeMine,
            benchmark: 'b',
            metrics: { a: 1 },
            created_at: '2026-01-04T00:00:00Z',
          },
        })
      ).status,
    ).toBe(403)
    expect(
      (
        await call('POST', '/lineage/manifests', {
          token: other.token,
          body: manifest('edge-theirs', { harness_run_id: mine.runId }),
        })
      ).status,
    ).toBe(403)
    expect((await call('GET', `/lineage/runs/${edgeMine}`)).status).toBe(401)
    expect((await call('GET', '/lineage/runs', { token: mine.token })).status).toBe(403)
  })

  it('lets a run token take only ids under its own run id, so it cannot squat one the admin wants', async () => {
    const run = await createRun({ anchor_rubrics: [{ text: 'Correct.' }] })
    const wanted = `admin-wants-${run.runId}`
    const squat = await call('POST', '/lineage/manifests', { token: run.token, body: manifest(wanted) })
    expect(squat.status).toBe(403)
    expect(squat.json.error.code).toBe('forbidden')
    expect(squat.json.error.message).toContain(`"${run.runId}.<name>"`)
    // A run id that merely starts with this one's is another run's namespace.
    const neighbour = await call('POST', '/lineage/manifests', { token: run.token, body: manifest(`${run.runId}-2.x`) })
    expect(neighbour.status).toBe(403)
    expect((await call('POST', '/lineage/manifests', { token: ADMIN_TOKEN, body: manifest(wanted) })).status).toBe(201)
    for (const own of [run.runId, `${run.runId}.seed-1`])
      expect((await call('POST', '/lineage/manifests', { token: run.token, body: manifest(own) })).status).toBe(201)
  })

  it('answers bad input with 400 naming the field', async () => {
    const badVersion = await call('POST', '/lineage/manifests', {
      token: ADMIN_TOKEN,
      body: manifest('edge-bad', { schema_version: '2.0' }),
    })
    expect(badVersion.status).toBe(400)
    expect(badVersion.json.error.details).toContainEqual(expect.objectContaining({ path: 'schema_version' }))
    const badTime = await call('POST', '/lineage/manifests', {
      token: ADMIN_TOKEN,
      body: manifest('edge-bad', { started_at: 'yesterday' }),
    })
    expect(badTime.status).toBe(400)
    expect(badTime.json.error.message).toContain('started_at')
    const noMetrics = await call('POST', '/lineage/evals', {
      token: ADMIN_TOKEN,
      body: {
        schema_version: '1.0',
        eval_id: 'e',
        run_id: 'edge-1',
        benchmark: 'b',
        metrics: {},
        created_at: '2026-01-04T00:00:00Z',
      },
    })
    expect(noMetrics.status).toBe(400)
    expect(noMetrics.json.error.message).toContain('metrics')
  })
})
