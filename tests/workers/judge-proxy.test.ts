/**
 * The OpenAI-compatible judge endpoint under a run (`/runs/<id>/v1`) and an RM target (`/rm/<target>/v1`), as
 * verifiers' `JudgeRubric` (the openai SDK: `chat.completions.create(model, messages)`, Bearer key) and ART's RULER
 * (LiteLLM: a `json_schema` response format) call it, on real workerd with a fake judge endpoint.
 */
import { afterEach, describe, expect, it, vi } from 'vitest'
import { makeRubricArtifact } from '../support/rubric-artifact.ts'
import { ADMIN_TOKEN, call, clearFakeEndpoints, createRun, fakeEndpoint, fakeRole } from './helpers.ts'

const RUBRICS = { anchor_rubrics: [{ id: 'a-correct', text: 'The final answer is correct.' }] }

afterEach(() => {
  clearFakeEndpoints()
  vi.restoreAllMocks()
})

/** verifiers' default JudgeRubric prompt, filled as its `judge` method fills it. */
const JUDGE_PROMPT =
  'Given a ground truth answer and a response, determine if the response is correct.\n\nQuestion:\n```\nWhat is ' +
  '2+2?\n```\n\nGround truth answer:\n```\n4\n```\n\nResponse:\n```\n4\n```\n\nRespond either "yes" or "no" only.'

describe('POST /runs/<id>/v1/chat/completions', () => {
  it("answers verifiers' JudgeRubric call with the run's judge, caches the same prompt, counts the call", async () => {
    const seen: unknown[] = []
    const judge = fakeEndpoint('proxy-verifiers', async (_, request) => {
      seen.push(await request.json())
      return 'yes'
    })
    const run = await createRun({ ...RUBRICS, agents: { scorer: fakeRole('proxy-verifiers') } })
    const body = {
      model: 'gpt-4.1-nano',
      messages: [{ role: 'user', content: JUDGE_PROMPT }],
      max_completion_tokens: 8,
    }
    const first = await call('POST', `/runs/${run.runId}/v1/chat/completions`, { token: run.token, body })
    expect(first.status, first.text).toBe(200)
    expect(first.json).toMatchObject({
      object: 'chat.completion',
      model: 'fake',
      choices: [{ index: 0, message: { role: 'assistant', content: 'yes' }, finish_reason: 'stop' }],
    })
    expect(seen).toHaveLength(1)
    expect(seen[0]).toMatchObject({ model: 'fake', messages: [{ role: 'user', content: JUDGE_PROMPT }] })
    const again = await call('POST', `/runs/${run.runId}/v1/chat/completions`, { token: run.token, body })
    expect(again.json.choices[0].message.content).toBe('yes')
    expect(judge.calls()).toBe(1)
    await vi.waitFor(
      async () => {
        const calls = (await call('GET', `/runs/${run.runId}/llm_calls`, { token: run.token })).json.calls
        expect(calls).toEqual([expect.objectContaining({ role: 'scorer', outcome: 'ok', calls: 1 })])
      },
      { timeout: 5_000, interval: 100 },
    )
    const models = await call('GET', `/runs/${run.runId}/v1/models`, { token: run.token })
    expect(models.json).toEqual({
      object: 'list',
      data: [{ id: 'fake', object: 'model', owned_by: 'reward-harness' }],
    })
  })

  it("forwards RULER's json_schema response format and its trajectories, and answers in OpenAI's shape", async () => {
    const seen: { response_format?: unknown; messages: { content: string }[] }[] = []
    fakeEndpoint('proxy-ruler', async (_, request) => {
      seen.push(await request.json())
      return JSON.stringify({ scores: [{ trajectory_id: '1', explanation: 'searched first', score: 0.9 }] })
    })
    const run = await createRun({
      ...RUBRICS,
      agents: { scorer: { ...fakeRole('proxy-ruler'), structured_output: 'json_schema' } },
    })
    const schema = { type: 'object', properties: { scores: { type: 'array' } }, required: ['scores'] }
    const trajectory = JSON.stringify([
      { role: 'assistant', tool_calls: [{ function: { name: 'search', arguments: '{}' } }] },
    ])
    const answer = await call('POST', `/t/${run.token}/runs/${run.runId}/v1/chat/completions`, {
      body: {
        model: 'openai/judge',
        messages: [
          { role: 'system', content: 'All of the trajectories below have been given the same goal.' },
          { role: 'user', content: `Trajectories:\n\n<trajectory id="1">\n${trajectory}\n</trajectory>` },
        ],
        response_format: { type: 'json_schema', json_schema: { name: 'Response', schema, strict: true } },
      },
    })
    expect(answer.status, answer.text).toBe(200)
    expect(JSON.parse(answer.json.choices[0].message.content).scores[0].score).toBe(0.9)
    expect(seen[0]!.response_format).toMatchObject({ type: 'json_schema', json_schema: { name: 'Response' } })
    expect(seen[0]!.messages[1]!.content).toContain('"name":"search"')
  })

  it("refuses a dummy key and a stream, and holds a failing judge to the run's judge_calls_per_rollout", async () => {
    const judge = fakeEndpoint('proxy-down', async () => new Response('down', { status: 500 }))
    const run = await createRun({
      ...RUBRICS,
      agents: { scorer: { ...fakeRole('proxy-down'), max_attempts: 6 } },
      budgets: { judge_calls_per_rollout: 2 },
    })
    const body = { model: 'm', messages: [{ role: 'user', content: 'yes or no?' }] }
    const dummy = await call('POST', `/runs/${run.runId}/v1/chat/completions`, { token: 'EMPTY', body })
    expect(dummy.status).toBe(401)
    const stream = await call('POST', `/runs/${run.runId}/v1/chat/completions`, {
      token: run.token,
      body: { ...body, stream: true },
    })
    expect([stream.status, stream.json.error.code]).toEqual([400, 'invalid_request'])
    const failed = await call('POST', `/runs/${run.runId}/v1/chat/completions`, { token: run.token, body })
    expect([failed.status, failed.json.error.code]).toEqual([503, 'llm_unavailable'])
    expect(judge.calls()).toBe(2)
  })
})

/** A content-addressed rubric artifact on the mock backend, deployed to a target of its own. */
async function deployedMockArtifact(target: string): Promise<void> {
  const artifact = await makeRubricArtifact([['relevant', 'Answers the question asked.']], 'proxy')
  expect([200, 201]).toContain((await call('POST', '/admin/artifacts', { token: ADMIN_TOKEN, body: artifact })).status)
  const deployed = await call('POST', `/admin/targets/${target}/deployments`, {
    token: ADMIN_TOKEN,
    body: { artifact_id: artifact.artifact_id },
  })
  expect(deployed.status, deployed.text).toBe(201)
}

describe('/rm/<target>/v1', () => {
  it("answers with the target's judge (here the mock, named as such) and caches the same request", async () => {
    const target = `proxy-${Date.now().toString(36)}`
    await deployedMockArtifact(target)
    const models = await call('GET', `/rm/${target}/v1/models`, {})
    expect(models.json.data).toEqual([{ id: 'mock-heuristic-1', object: 'model', owned_by: 'reward-harness' }])
    const body = { model: 'any', messages: [{ role: 'user', content: `${JUDGE_PROMPT} (${target})` }] }
    const first = await call('POST', `/rm/${target}/v1/chat/completions`, { body })
    expect(first.status, first.text).toBe(200)
    expect(first.json).toMatchObject({ model: 'mock-heuristic-1', choices: [{ message: { content: 'yes' } }] })
    const again = await call('POST', `/rm/${target}/v1/chat/completions`, { body })
    expect(again.headers.get('x-reward-harness-cached')).toBe('1')
  })

  it('names a target nothing was deployed to', async () => {
    const answer = await call('GET', '/rm/never-deployed/v1/models', {})
    expect([answer.status, answer.json.error.code]).toEqual([404, 'target_not_found'])
  })
})
