/**
 * The default run's agents: the mock unless `npm start -- --judge local` passed a local judge's URL and model, and
 * never a loopback judge where DEPLOYMENT is not local.
 */
import { describe, expect, it } from 'vitest'
import { defaultRunConfig } from '../../durable-objects/run-config.ts'
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
    expect(config.anchor_rubrics.length).toBeGreaterThan(0)
  })

  it('ignores a local judge where DEPLOYMENT is not local', () => {
    expect(backendOf(agentSettingsFor(defaultRunConfig({ DEPLOYMENT: 'production', ...JUDGE }), 'scorer'))).toBe('mock')
  })
})
