/**
 * A configuration a person writes is read strictly: a misspelt key is a 400 naming it and the key it most likely
 * meant, never dropped while its default silently applies. A configuration stored by an earlier version is read
 * leniently: a key this version no longer knows does not lock the run out.
 */
import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import { visibleRuns } from '../../workers/dashboard/data.ts'
import { ADMIN_TOKEN, METADATA, call, rollout } from './helpers.ts'

const RUBRICS = { anchor_rubrics: [{ text: 'The final answer is correct.' }] }

const runCount = async (runId: string) =>
  (await env.DB.prepare('SELECT count(*) AS n FROM runs WHERE id = ?').bind(runId).first<{ n: number }>())?.n

describe('a run config with a misspelt key', () => {
  it('is refused (400) naming each unknown key and the key it meant, and no run is created', async () => {
    const res = await call('POST', '/runs', {
      token: ADMIN_TOKEN,
      body: { run_id: 'misspelt-1', config: { ...RUBRICS, rubric_mode: 'per_instance', rollout_per_step: 8 } },
    })
    expect(res.status).toBe(400)
    expect(res.json.error.code).toBe('invalid_request')
    expect(res.json.error.message).toContain('"rubric_mode" (did you mean rubrics_mode?)')
    expect(res.json.error.message).toContain('"rollout_per_step" (did you mean rollouts_per_step?)')
    expect(res.json.error.details).toEqual([
      {
        path: 'config',
        message:
          'unknown keys "rubric_mode" (did you mean rubrics_mode?), ' +
          '"rollout_per_step" (did you mean rollouts_per_step?)',
      },
    ])
    expect(await runCount('misspelt-1')).toBe(0)
  })

  it('is refused when the key is in agents, analysis, audit or a rubric, naming the object holding it', async () => {
    const cases = [
      [{ agents: { scorer: { modle: 'judge' } } }, 'config.agents.scorer', '"modle" (did you mean model?)'],
      [
        { agents: { default: { temprature: 0.2 } } },
        'config.agents.default',
        '"temprature" (did you mean temperature?)',
      ],
      [{ agents: { scorrer: { model: 'judge' } } }, 'config.agents', '"scorrer" (did you mean scorer?)'],
      [{ analysis: { max_per_steps: 4 } }, 'config.analysis', '"max_per_steps" (did you mean max_per_step?)'],
      [{ audit: { samples: 0.5 } }, 'config.audit', '"samples" (did you mean sample?)'],
      [
        { anchor_rubrics: [{ text: 'Correct.', wieght: 2 }] },
        'config.anchor_rubrics.0',
        '"wieght" (did you mean weight?)',
      ],
    ] as const
    for (const [extra, path, named] of cases) {
      const res = await call('POST', '/runs', { token: ADMIN_TOKEN, body: { config: { ...RUBRICS, ...extra } } })
      expect(res.status, path).toBe(400)
      expect(res.json.error.code).toBe('invalid_request')
      expect(res.json.error.details).toEqual([{ path, message: expect.stringContaining(named) }])
    }
  })

  it('with no likely spelling lists the keys there are', async () => {
    const res = await call('POST', '/runs', { token: ADMIN_TOKEN, body: { config: { ...RUBRICS, audit: { xyz: 1 } } } })
    expect(res.status).toBe(400)
    expect(res.json.error.details).toEqual([
      { path: 'config.audit', message: 'unknown key "xyz"; the keys are sample' },
    ])
  })
})

describe("a deployment's llm with a misspelt key", () => {
  it('is refused (400) naming the key and the key it meant', async () => {
    const res = await call('POST', '/admin/targets/strict-llm/deployments', {
      token: ADMIN_TOKEN,
      body: { artifact_id: `rm_${'0'.repeat(64)}`, llm: { base_url: 'http://127.0.0.1:9/v1', modle: 'qwen-judge' } },
    })
    expect(res.status).toBe(400)
    expect(res.json.error.code).toBe('invalid_request')
    expect(res.json.error.details).toEqual([{ path: 'llm', message: 'unknown key "modle" (did you mean model?)' }])
  })
})

describe('a run config stored by an earlier version', () => {
  it('still loads with keys this version does not know, at the top and nested, and its run scores', async () => {
    const stored = {
      ...RUBRICS,
      anchor_rubrics: [{ text: 'The final answer is correct.', obsolete_note: 'x' }],
      rubric_update_frequency: 3,
      obsolete_knob: true,
      agents: { default: { model: 'mock-heuristic-1', obsolete_pool: 3 }, scorer: { obsolete: 1 } },
      analysis: { max_per_step: 4, obsolete_budget: 9 },
      audit: { sample: 0, obsolete_rate: 1 },
    }
    await env.DB.prepare('INSERT INTO runs (id, config, created_at) VALUES (?, ?, ?)')
      .bind('legacy-1', JSON.stringify(stored), new Date().toISOString())
      .run()
    const run = await call('GET', '/runs/legacy-1/run', { token: ADMIN_TOKEN })
    expect(run.status).toBe(200)
    expect(run.json.config).toMatchObject({
      rubric_update_frequency: 3,
      analysis: { max_per_step: 4 },
      audit: { sample: 0 },
    })
    expect(run.text).not.toContain('obsolete')
    const scored = await call('POST', '/runs/legacy-1/score', {
      token: ADMIN_TOKEN,
      body: { rollout: rollout('legacy-r1'), metadata: METADATA },
    })
    expect(scored.status).toBe(200)
    expect((await visibleRuns(env, { kind: 'admin' })).map((summary) => summary.id)).toContain('legacy-1')
  })
})
