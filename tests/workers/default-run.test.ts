/**
 * The default run's agents, and those of a run created without any: the mock unless `npm start -- --judge local`
 * passed a local judge's URL and model, and never a loopback judge where DEPLOYMENT is not local.
 */
import { env } from 'cloudflare:workers'
import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { defaultRunConfig } from '../../durable-objects/run-config.ts'
import { createApp } from '../../workers/app.ts'
import { ADMIN_TOKEN, answerOf, requestOf } from './helpers.ts'
import { agentSettingsFor } from '../../src/schemas/run-config.ts'
import { backendOf } from '../../src/llm/compose.ts'

const JUDGE = { LOCAL_JUDGE_URL: 'http://127.0.0.1:8090/v1', LOCAL_JUDGE_MODEL: 'smollm2-135m' }

describe('the default run', () => {
  it('grades with the mock unless a local judge is named', () => {
    expect(backendOf(agentSettingsFor(defaultRunConfig({ DEPLOYMENT: 'local' }), 'scorer'))).toBe('mock')
  })

  it("points every role at the local judge, two calls at a time (its slots), under npm start's --judge local", () => {
    const config = defaultRunConfig({ DEPLOYMENT: 'local', ...JUDGE })
    const scorer = agentSettingsFor(config, 'scorer')
    expect(scorer).toMatchObject({
      backend: 'openai',
      base_url: JUDGE.LOCAL_JUDGE_URL,
      model: 'smollm2-135m',
      structured_output: 'json_schema',
    })
    expect(scorer.concurrency).toBe(2)
    // A step stays open as long as one judgement may take, not the mock's 30 s.
    expect(config.close_after_idle_s).toBe(300)
    expect(defaultRunConfig({ DEPLOYMENT: 'local' }).close_after_idle_s).toBe(30)
    expect(config.anchor_rubrics.length).toBeGreaterThan(0)
    // llama.cpp's server sends top_logprobs: a small judge keeps its signal as verdicts (BENCHMARKS.md, gsm8k).
    expect(config.judging).toBe('verdicts')
    expect(defaultRunConfig({ DEPLOYMENT: 'local' }).judging).toBe('grades')
  })

  it('ignores a local judge where DEPLOYMENT is not local', () => {
    expect(backendOf(agentSettingsFor(defaultRunConfig({ DEPLOYMENT: 'production', ...JUDGE }), 'scorer'))).toBe('mock')
  })
})

describe('a run created under npm start -- --judge local', () => {
  const app = createApp()
  let created = 0
  const createUnder = async (vars: Record<string, string>, config: Record<string, unknown>) => {
    const ctx = createExecutionContext()
    const body = { run_id: `local-judge-${++created}`, config: { anchor_rubrics: [{ text: 'Correct.' }], ...config } }
    const response = await app.fetch(
      requestOf('POST', '/runs', { token: ADMIN_TOKEN, body }),
      { ...env, ...vars } as typeof env,
      ctx,
    )
    await waitOnExecutionContext(ctx)
    return answerOf(response)
  }
  const agents = fc.oneof(
    fc.constant({ default: { backend: 'mock' } }),
    fc.record({ default: fc.constant({ backend: 'openai', base_url: 'http://127.0.0.1:9/v1', model: 'other' }) }),
    fc.record({ scorer: fc.record({ temperature: fc.double({ min: 0, max: 1, noNaN: true }) }) }),
  )

  it('gets the local judge for every role when it names no agents, and keeps the agents it names', async () => {
    await fc.assert(
      fc.asyncProperty(fc.option(agents, { nil: undefined }), async (named) => {
        const answer = await createUnder(
          { DEPLOYMENT: 'local', ...JUDGE },
          named === undefined ? {} : { agents: named },
        )
        expect(answer.status, answer.text).toBe(201)
        const scorer = agentSettingsFor(answer.json.config, 'scorer')
        if (named === undefined) expect(scorer).toMatchObject({ backend: 'openai', model: 'smollm2-135m' })
        else if ('scorer' in named || named.default.backend === 'mock') expect(backendOf(scorer)).toBe('mock')
        else expect(scorer).toMatchObject({ backend: 'openai', model: 'other' })
      }),
      { numRuns: 12 },
    )
  })

  it('judges by verdicts unless it names its judging, or its budget has too few calls for its criteria', async () => {
    const local = { DEPLOYMENT: 'local', ...JUDGE }
    expect((await createUnder(local, {})).json.config.judging).toBe('verdicts')
    expect((await createUnder(local, { judging: 'grades' })).json.config.judging).toBe('grades')
    const many = { adaptive_rubrics: [{ text: 'Shows steps.' }, { text: 'Names units.' }] }
    const tight = await createUnder(local, { ...many, budgets: { judge_calls_per_rollout: 2 } })
    expect(tight.status, tight.text).toBe(201)
    expect(tight.json.config.judging).toBe('grades')
    expect((await createUnder({ DEPLOYMENT: 'local' }, {})).json.config.judging).toBe('grades')
  })

  it('gets the mock where no local judge is named', async () => {
    const answer = await createUnder({ DEPLOYMENT: 'local' }, {})
    expect(answer.status, answer.text).toBe(201)
    expect(backendOf(agentSettingsFor(answer.json.config, 'scorer'))).toBe('mock')
  })
})
