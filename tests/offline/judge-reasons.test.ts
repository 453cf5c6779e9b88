/**
 * A run that scores without reasons still gives the analyzer the judge's reasons for the rollouts it analyses: one
 * more scorer call, with short reasons, for each of those few rollouts, keeping the recorded grades.
 */
import { describe, expect, it } from 'vitest'
import type { RecordedRollout } from '../../durable-objects/contracts.ts'
import type { ChatRequest } from '../../src/llm/types.ts'
import { AgentSettings, RunConfig } from '../../src/schemas/run-config.ts'
import { criteriaWithReasons } from '../../workers/pipeline/judge-reasons.ts'
import { rubric } from '../support/rubrics.ts'

const RUBRICS = [rubric('a1', undefined, { is_anchor: true }), rubric('d1', undefined, { is_anchor: true })]
const RECORDED: RecordedRollout = {
  entry: {
    rollout_id: 'r1',
    step: 0,
    rubric_version: 1,
    score: 0.65,
    cached: false,
    criteria: [
      { rubric_id: 'a1', grade: 9, weight: 1 },
      { rubric_id: 'd1', grade: 4, weight: 1 },
    ],
  },
  rollout: { id: 'r1', input: 'What is 2+2?', output: '4' },
  metadata: { high_level_goal: 'math', model_size: '7B', current_step: 0, total_steps: 10 },
}
const config = (reasons?: 'none' | 'short') =>
  RunConfig.parse({ anchor_rubrics: [{ text: 'x' }], ...(reasons ? { reasons } : {}) })

function scorer(reply: string | Error) {
  const requests: ChatRequest[] = []
  const model = {
    id: 'recording',
    complete: async (request: ChatRequest) => {
      requests.push(request)
      if (reply instanceof Error) throw reply
      return { text: reply, model: 'recording', usage: { prompt_tokens: 0, completion_tokens: 0 } }
    },
  }
  return { requests, pick: () => ({ model, settings: AgentSettings.parse({ max_attempts: 1 }) }) }
}

const REASONED = '{"grades":{"a1":3,"d1":5},"reasons":{"a1":"the sum is right","d1":"no steps shown"}}'

describe('criteriaWithReasons', () => {
  it('asks the scorer again, with reasons, and keeps the recorded grades (reasons: none, the default)', async () => {
    expect(config().reasons).toBe('none')
    const { requests, pick } = scorer(REASONED)
    const criteria = await criteriaWithReasons(config(), pick, RECORDED, RUBRICS)
    expect(criteria).toEqual([
      { rubric_id: 'a1', grade: 9, weight: 1, reason: 'the sum is right' },
      { rubric_id: 'd1', grade: 4, weight: 1, reason: 'no steps shown' },
    ])
    expect(requests).toHaveLength(1)
    expect(requests[0]!.messages[0]!.content).toContain('"reasons"')
  })

  it('makes no call when the scores already carry reasons, and goes on without them when the call fails', async () => {
    const withReasons = {
      ...RECORDED,
      entry: { ...RECORDED.entry, criteria: [{ ...RECORDED.entry.criteria[0]!, reason: 'ok' }] },
    }
    const idle = scorer(REASONED)
    expect(await criteriaWithReasons(config('short'), idle.pick, RECORDED, RUBRICS)).toBe(RECORDED.entry.criteria)
    expect(await criteriaWithReasons(config(), idle.pick, withReasons, RUBRICS)).toBe(withReasons.entry.criteria)
    expect(idle.requests).toHaveLength(0)
    const failing = scorer(new Error('down'))
    expect(await criteriaWithReasons(config(), failing.pick, RECORDED, RUBRICS)).toBe(RECORDED.entry.criteria)
  })
})
