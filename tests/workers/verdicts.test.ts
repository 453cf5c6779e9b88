/**
 * `judging: "verdicts"` in workerd: a `/score` asks its scorer one Yes/No question per criterion on an
 * OpenAI-compatible endpoint, reads the probability of Yes from the first token's `top_logprobs`, and answers the
 * reward from those probabilities; every call counts, in `/llm_calls` and against `budgets.judge_calls_per_rollout`.
 */
import { env } from 'cloudflare:workers'
import { afterEach, describe, expect, it } from 'vitest'
import type { RecordedRollout } from '../../durable-objects/contracts.ts'
import type { ChatRequest } from '../../src/llm/types.ts'
import { AgentSettings, RunConfig } from '../../src/schemas/run-config.ts'
import type { Rubric } from '../../src/schemas/rubric.ts'
import { ArtifactScorer, RmScoreRequest } from '../../workers/artifacts/score.ts'
import { judgeRecorded } from '../../workers/pipeline/recorded.ts'
import { makeRubricArtifact } from '../support/rubric-artifact.ts'
import { callApp, call, clearFakeEndpoints, createRun, fakeEndpoint, fakeRole, METADATA, rollout } from './helpers.ts'

const RUBRICS = {
  anchor_rubrics: [{ id: 'a-correct', text: 'The final answer is correct.', weight: 2 }],
  adaptive_rubrics: [{ id: 'd-steps', text: 'Shows the key steps of the calculation.' }],
}
/** P(Yes) the fake judge gives each criterion, told apart by the question that ends its prompt. */
const SHARES: Record<string, number> = {
  'The final answer is correct.': 0.9,
  'Shows the key steps of the calculation.': 0.25,
}

/** An OpenAI chat completion of one token whose first-token alternatives give Yes the share `yes`. */
function verdictCompletion(yes: number): Response {
  const top = [
    { token: 'Yes', logprob: Math.log(yes) },
    { token: 'No', logprob: Math.log(1 - yes) },
  ]
  const completion = {
    id: 'c',
    object: 'chat.completion',
    created: 0,
    model: 'fake',
    choices: [
      {
        index: 0,
        finish_reason: 'length',
        message: { role: 'assistant', content: yes >= 0.5 ? 'Yes' : 'No' },
        logprobs: { content: [{ token: 'Yes', logprob: top[0]!.logprob, top_logprobs: top }] },
      },
    ],
  }
  return new Response(JSON.stringify(completion), { headers: { 'content-type': 'application/json' } })
}

/** A model's reply to a verdict request: Yes with the share `SHARES` gives the criterion it asks. */
function verdictReply(request: ChatRequest) {
  const question = request.messages.at(-1)!.content as string
  const yes = Object.entries(SHARES).find(([text]) => question.includes(`Criterion: ${text}`))?.[1] ?? 0
  const firstTokenLogprobs = [
    { token: 'Yes', logprob: Math.log(yes) },
    { token: 'No', logprob: Math.log(1 - yes) },
  ]
  return { text: 'Yes', model: 'recording', usage: { prompt_tokens: 1, completion_tokens: 1 }, firstTokenLogprobs }
}

/** A model that answers every verdict request as {@link verdictReply} does; the requests it got, in order. */
function recordingVerdictModel() {
  const asked: ChatRequest[] = []
  const model = {
    id: 'recording',
    complete: async (request: ChatRequest) => {
      asked.push(request)
      return verdictReply(request)
    },
  }
  return { model, asked }
}

/** A fake judge answering each verdict request by the criterion it asks; the bodies it got, in order. */
function verdictJudge(tag: string) {
  const bodies: Record<string, unknown>[] = []
  const endpoint = fakeEndpoint(tag, async (_index, request) => {
    const body = (await request.json()) as { messages: { content: string }[] } & Record<string, unknown>
    bodies.push(body)
    const question = body.messages.at(-1)!.content
    const criterion = Object.keys(SHARES).find((text) => question.includes(`Criterion: ${text}`))
    return criterion ? verdictCompletion(SHARES[criterion]!) : new Response('not a verdict request', { status: 400 })
  })
  return { endpoint, bodies }
}

afterEach(() => clearFakeEndpoints())

describe('POST /score with judging: verdicts', () => {
  it('asks each criterion as Yes or No and scores the probabilities, unrounded; each call is counted', async () => {
    const judge = verdictJudge('verdicts-probabilities')
    const run = await createRun({
      ...RUBRICS,
      judging: 'verdicts',
      agents: { scorer: fakeRole('verdicts-probabilities') },
    })
    const scored = await callApp('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('v-1'), metadata: METADATA },
    })
    expect(scored.status, scored.text).toBe(200)
    expect(scored.json.criteria).toEqual([
      expect.objectContaining({ rubric_id: 'a-correct', grade: 9, probability: expect.closeTo(0.9, 12) }),
      expect.objectContaining({ rubric_id: 'd-steps', grade: 3, probability: expect.closeTo(0.25, 12) }),
    ])
    expect(scored.json.score).toBeCloseTo((2 * 0.9 + 0.25) / 3, 12)
    expect(judge.endpoint.calls()).toBe(2)
    for (const body of judge.bodies) expect(body).toMatchObject({ logprobs: true, top_logprobs: 20, max_tokens: 1 })
    expect(judge.bodies.every((body) => body.response_format === undefined)).toBe(true)
    const { json } = await callApp('GET', '/llm_calls', { token: run.token })
    const scorerCalls = json.calls
      .filter((group: { role: string }) => group.role === 'scorer')
      .reduce((sum: number, group: { calls: number }) => sum + group.calls, 0)
    expect(scorerCalls).toBe(2)
  })

  it("keeps a criterion's retries in judge_calls_per_rollout, a call left for each criterion to ask", async () => {
    const endpoint = fakeEndpoint('verdicts-budget', async () => new Response('down', { status: 500 }))
    const run = await createRun({
      ...RUBRICS,
      judging: 'verdicts',
      agents: { scorer: { ...fakeRole('verdicts-budget'), max_attempts: 5, timeout_ms: 1_000 } },
      budgets: { judge_calls_per_rollout: 3 },
    })
    const refused = await call('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('v-2'), metadata: METADATA },
    })
    expect(refused.status, refused.text).toBe(429)
    expect(refused.json.error).toMatchObject({
      code: 'judge_budget_exceeded',
      details: { budget: 'budgets.judge_calls_per_rollout', limit: 3 },
    })
    // The first criterion may take 2 of the 3 calls, since the second criterion still needs one; both failed.
    expect(endpoint.calls()).toBe(2)
  })

  it('refuses a run whose first rubrics need more verdict calls than judge_calls_per_rollout allows', async () => {
    const created = await call('POST', '/runs', {
      token: env.ADMIN_TOKEN,
      body: { config: { ...RUBRICS, judging: 'verdicts', budgets: { judge_calls_per_rollout: 1 } } },
    })
    expect(created.status, created.text).toBe(400)
    expect(created.json.error.message).toContain('judge_calls_per_rollout')
  })

  it('refuses, before any call or record, a batch whose verdicts pass a full batch of first calls', async () => {
    const judge = verdictJudge('verdicts-batch')
    const run = await createRun({ ...RUBRICS, judging: 'verdicts', agents: { scorer: fakeRole('verdicts-batch') } })
    // 2 criteria each: 4,097 rollouts need 8,194 first calls, past the 8,192 of a full batch of one-call judgements.
    const items = Array.from({ length: 4_097 }, (_, index) => ({
      rollout: rollout(`b-${index}`, { output: `The answer is ${index}.` }),
      metadata: METADATA,
    }))
    const refused = await call('POST', '/score/batch', { token: run.token, body: { items } })
    expect(refused.status, refused.text.slice(0, 300)).toBe(200)
    const errors = new Set(refused.json.results.map((result: { error?: { code: string } }) => result.error?.code))
    expect([...errors]).toEqual(['payload_too_large'])
    expect(refused.json.results[0].error.message).toContain('need 8194 calls, at most 8192 per request')
    expect(judge.endpoint.calls()).toBe(0)
    const fits = await call('POST', '/score/batch', { token: run.token, body: { items: items.slice(0, 3) } })
    expect(fits.json.results.map((result: { score?: number }) => result.score)).toEqual([
      expect.closeTo((2 * 0.9 + 0.25) / 3, 12),
      expect.closeTo((2 * 0.9 + 0.25) / 3, 12),
      expect.closeTo((2 * 0.9 + 0.25) / 3, 12),
    ])
  })

  it('grades a trajectory in one call, as judging: grades does', async () => {
    const endpoint = fakeEndpoint('verdicts-trajectory', async () =>
      JSON.stringify({ grades: { 'a-correct': 8, 'd-steps': 6 } }),
    )
    const run = await createRun({
      ...RUBRICS,
      judging: 'verdicts',
      agents: { scorer: fakeRole('verdicts-trajectory') },
    })
    const messages = [
      { role: 'user', content: 'What is 2+2?' },
      { role: 'assistant', content: '2+2 is 4.' },
    ]
    const scored = await call('POST', '/score', {
      token: run.token,
      body: { rollout: { id: 'v-3', messages }, metadata: METADATA },
    })
    expect(scored.status, scored.text).toBe(200)
    expect(endpoint.calls()).toBe(1)
    expect(scored.json.criteria.map((criterion: { grade: number }) => criterion.grade)).toEqual([8, 6])
    expect(scored.json.criteria[0].probability).toBeUndefined()
  })

  it("re-judges a recorded rollout (the audit's and the analyzer's path) by verdicts too", async () => {
    const { model, asked } = recordingVerdictModel()
    const config = RunConfig.parse({ ...RUBRICS, judging: 'verdicts' })
    const rubrics: Rubric[] = [
      { ...RUBRICS.anchor_rubrics[0]!, is_anchor: true },
      { ...RUBRICS.adaptive_rubrics[0]!, weight: 1, is_anchor: false },
    ].map((rubric) => ({ ...rubric, version: 1, created_at: '2026-01-01T00:00:00Z', metadata: {} }))
    const recorded = { rollout: rollout('v-4'), metadata: METADATA } as unknown as RecordedRollout
    const judged = await judgeRecorded({ model, settings: AgentSettings.parse({}) }, config, recorded, rubrics)
    expect(asked.map((request) => request.firstTokenAlternatives)).toEqual([20, 20])
    expect(judged.score).toBeCloseTo((2 * 0.9 + 0.25) / 3, 12)
  })

  it('/rm grades by verdicts an artifact whose runtime says so (searched with --judging verdicts)', async () => {
    const { model, asked } = recordingVerdictModel()
    const artifact = await makeRubricArtifact([
      ['correct', 'The final answer is correct.'],
      ['steps', 'Shows the key steps of the calculation.'],
    ])
    const scorer = new ArtifactScorer({ ...artifact, runtime: { ...artifact.runtime, judging: 'verdicts' } }, model)
    const scored = await scorer.score(
      RmScoreRequest.parse({
        prompt_id: 'unseen',
        prompt: 'What is 6 × 7?',
        candidate: { candidate_id: 'c', text: '42' },
      }),
    )
    expect(asked.map((request) => request.firstTokenAlternatives)).toEqual([20, 20])
    expect(scored.criteria.map((criterion) => criterion.grade)).toEqual([expect.closeTo(9, 9), expect.closeTo(2.5, 9)])
  })
})
