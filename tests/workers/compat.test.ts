import { env } from 'cloudflare:workers'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { type LlmCallRecord, MockChatModel } from '../../src/llm/index.ts'
import type { ChunkOutcome } from '../../workers/scoring/judgement.ts'
import { JudgeEntrypoint } from '../../workers/scoring/judge-entrypoint.ts'
import { judgeService } from '../../workers/scoring/judge-service.ts'
import { DEFAULT_TRAINING_METADATA, groupAdvantages, promptText, responseOf } from '../../workers/routes/compat.ts'
import { ADMIN_TOKEN, call, createRun, expectStatus, ledgerRows } from './helpers.ts'

const RUBRICS = {
  anchor_rubrics: [{ id: 'a-correct', text: 'The final answer is correct.', weight: 2 }],
  adaptive_rubrics: [{ id: 'd-steps', text: 'Shows the key steps.' }],
}

const PROMPTS = [
  '<|user|>What is 2+2?<|assistant|>',
  '<|user|>What is 3*3?<|assistant|>',
  '<|user|>Capital of France?<|assistant|>',
] as const
const RESPONSES = ['2 + 2 = 4', '3 * 3 = 6', 'Paris is the capital of France.'] as const
const LABELS = ['4', '9', 'Paris'] as const

afterEach(() => vi.restoreAllMocks())

function expectError(res: { status: number; json: any }, status: number, code: string) {
  expect(res.status, JSON.stringify(res.json)).toBe(status)
  expect(res.json.error.code).toBe(code)
  expect(res.json.error.message).toMatch(/\w{3,}/)
}

describe('POST /compat/openrlhf', () => {
  it('scores 3 samples: 3 rewards in [0,1], scores alike, per-sample extra_logs; 3 rollouts counted', async () => {
    const run = await createRun(RUBRICS)
    const res = await call('POST', `/runs/${run.runId}/compat/openrlhf`, {
      token: run.token,
      body: { query: PROMPTS.map((prompt, i) => prompt + RESPONSES[i]), prompts: PROMPTS, labels: LABELS },
    })
    expect(res.status, res.text).toBe(200)
    expect(res.json.rewards).toHaveLength(3)
    for (const reward of res.json.rewards) {
      expect(reward).toBeGreaterThanOrEqual(0)
      expect(reward).toBeLessThanOrEqual(1)
    }
    expect(res.json.scores).toEqual(res.json.rewards)
    expect(res.json.extra_logs).toEqual({ rubric_version: [1, 1, 1], cached: [0, 0, 0], duplicate: [0, 0, 0] })
    // The right answers beat the wrong one (mock heuristic reads the label as the reference).
    expect(res.json.rewards[0]).toBeGreaterThan(res.json.rewards[1])
    await expectStatus(run.token, { run_id: run.runId, status: 'collecting', rollouts: 3 })
    expect(await ledgerRows(run.runId)).toBe(3)
  })

  it('grades the response without its prompt prefix, the label as reference, with the default metadata', async () => {
    const run = await createRun(RUBRICS)
    const direct = await call('POST', '/score', {
      token: run.token,
      body: {
        rollout: { id: 'direct', input: PROMPTS[0], output: RESPONSES[0], supplemental_context: LABELS[0] },
        metadata: DEFAULT_TRAINING_METADATA,
      },
    })
    expect(direct.status).toBe(200)
    // Same content → the judgement cache answers: proof that the trainer's query was split as /score was called.
    const viaOpenRlhf = await call('POST', '/compat/openrlhf', {
      token: run.token,
      body: { query: [PROMPTS[0] + RESPONSES[0]], prompts: [PROMPTS[0]], labels: [LABELS[0]] },
    })
    expect(viaOpenRlhf.json).toMatchObject({
      rewards: [direct.json.score],
      extra_logs: { cached: [1], duplicate: [0] },
    })
  })

  it('counts a retried sample once (the rollout id is a hash of the query)', async () => {
    const run = await createRun(RUBRICS)
    const body = { query: [PROMPTS[1] + RESPONSES[1]], prompts: [PROMPTS[1]], labels: [LABELS[1]] }
    const first = await call('POST', '/compat/openrlhf', { token: run.token, body })
    const retry = await call('POST', '/compat/openrlhf', { token: run.token, body })
    expect(retry.json.rewards).toEqual(first.json.rewards)
    expect(retry.json.extra_logs.duplicate).toEqual([1])
    await expectStatus(run.token, { rollouts: 1 })
  })

  it('answers empty lists at once with empty lists (the shards OpenRLHF sends to its other servers)', async () => {
    const res = await call('POST', '/compat/openrlhf', { body: { query: [], prompts: [], labels: [] } })
    expect(res.status).toBe(200)
    // OpenRLHF ≤ 0.9 merges extra_logs by the first server's keys: an empty shard keeps them all.
    expect(res.json).toEqual({ rewards: [], scores: [], extra_logs: { rubric_version: [], cached: [], duplicate: [] } })
  })

  it('scores 300 samples (distinct contents judged once, in chunks for other invocations), calls counted', async () => {
    // The mock model answers in this isolate, so its calls are counted as they are made.
    const modelCalls = vi.spyOn(MockChatModel.prototype, 'complete')
    const scorerCalls = () => modelCalls.mock.calls.filter(([request]) => request.role === 'scorer').length
    // Each chunk reaches the JUDGE entrypoint as an invocation of its own (the binding calls into this isolate).
    const chunks = vi.spyOn(JudgeEntrypoint.prototype, 'judge')
    const run = await createRun(RUBRICS)
    const distinct = Array.from({ length: 250 }, (_, i) => ({
      prompt: `<|user|>What is ${i}+1?<|assistant|>`,
      response: `${i}+1 = ${i + 1}`,
      label: String(i + 1),
    }))
    // 50 repeats of earlier contents: OpenRLHF sends a prompt's samples side by side, and identical ones are common.
    const samples = [...distinct, ...distinct.slice(0, 50)]
    const res = await call('POST', `/runs/${run.runId}/compat/openrlhf`, {
      token: run.token,
      body: {
        query: samples.map((s) => s.prompt + s.response),
        prompts: samples.map((s) => s.prompt),
        labels: samples.map((s) => s.label),
      },
    })
    expect(res.status, res.text).toBe(200)
    expect(res.json.rewards).toHaveLength(300)
    expect(scorerCalls()).toBe(250)
    // 250 distinct contents, 24 judged per invocation: 10 chunks of 25, every one judged by another invocation.
    expect(chunks.mock.calls.map(([chunk]) => chunk.items.length)).toEqual(Array(10).fill(25))
    // Chunks arrive in any order; together they are the distinct contents, each a run of 25 in input order.
    const handedOut = chunks.mock.calls.map(([chunk]) => chunk.items.map((item) => item.request.rollout.output))
    const position = new Map(distinct.map((s, i) => [s.response, i]))
    handedOut.sort((a, b) => position.get(a[0]!)! - position.get(b[0]!)!)
    expect(handedOut.flat()).toEqual(distinct.map((s) => s.response))
    expect(res.json.rewards.slice(250)).toEqual(res.json.rewards.slice(0, 50))
    // A repeat in the batch is a sample of its own (a GRPO group at low temperature): judged once, recorded as one more
    // rollout of the step.
    expect(res.json.extra_logs.duplicate.filter((d: number) => d === 1)).toHaveLength(0)
    await expectStatus(run.token, { rollouts: 300 })
    let calls: any[] = []
    await vi.waitFor(
      async () => {
        calls = (await call('GET', '/llm_calls', { token: run.token })).json.calls
        expect(calls.filter((c) => c.role === 'scorer').reduce((sum, c) => sum + c.calls, 0)).toBe(250)
      },
      { timeout: 5_000, interval: 50 },
    )
    // The same body again: everything is recorded, so the retry costs no model call.
    modelCalls.mockClear()
    chunks.mockClear()
    const retry = await call('POST', `/runs/${run.runId}/compat/openrlhf`, {
      token: run.token,
      body: {
        query: samples.map((s) => s.prompt + s.response),
        prompts: samples.map((s) => s.prompt),
        labels: samples.map((s) => s.label),
      },
    })
    expect(retry.json.rewards).toEqual(res.json.rewards)
    expect(retry.json.extra_logs.duplicate.every((d: number) => d === 1)).toBe(true)
    expect(scorerCalls()).toBe(0)
    expect(chunks).not.toHaveBeenCalled()
    modelCalls.mockRestore()
    chunks.mockRestore()
    calls = (await call('GET', '/llm_calls', { token: run.token })).json.calls
    expect(calls.filter((c) => c.role === 'scorer').reduce((sum, c) => sum + c.calls, 0)).toBe(250)
  })

  it('answers 503 for a chunk whose invocation failed, never judging it twice; the retry completes it', async () => {
    const samples = Array.from({ length: 100 }, (_, i) => ({
      prompt: `<|user|>What is ${i}*2?<|assistant|>`,
      response: i % 3 ? `${i}*2 = ${i * 2}` : 'I do not know',
      label: String(i * 2),
    }))
    const body = {
      query: samples.map((s) => s.prompt + s.response),
      prompts: samples.map((s) => s.prompt),
      labels: samples.map((s) => s.label),
    }
    const unfaultedRun = await createRun(RUBRICS)
    const unfaulted = await call('POST', `/runs/${unfaultedRun.runId}/compat/openrlhf`, {
      token: unfaultedRun.token,
      body,
    })
    expect(unfaulted.status, unfaulted.text).toBe(200)

    const modelCalls = vi.spyOn(MockChatModel.prototype, 'complete')
    const scorerCalls = () => modelCalls.mock.calls.filter(([request]) => request.role === 'scorer').length
    // 100 distinct contents go out as 4 chunks of 25; the first to reach the entrypoint fails as a lost invocation
    // (which may have spent its items' judge calls before it failed).
    const chunks = vi
      .spyOn(JudgeEntrypoint.prototype, 'judge')
      .mockRejectedValueOnce(new Error('the invocation was lost'))
    const run = await createRun(RUBRICS)
    const res = await call('POST', `/runs/${run.runId}/compat/openrlhf`, { token: run.token, body })
    expect(res.status).toBe(503)
    expect(res.headers.get('retry-after')).toBe('1')
    expect(res.json.error.code).toBe('overloaded')
    expect(chunks.mock.calls.map(([chunk]) => chunk.items.length)).toEqual([25, 25, 25, 25])
    // The lost chunk's 25 were not judged here: 75 calls, each item once.
    expect(scorerCalls()).toBe(75)
    await expectStatus(run.token, { rollouts: 75 })
    // OpenRLHF retries the request: only the 25 lost are judged, and the rewards are as without the fault.
    const retry = await call('POST', `/runs/${run.runId}/compat/openrlhf`, { token: run.token, body })
    expect(retry.status, retry.text).toBe(200)
    expect(retry.json.rewards).toEqual(unfaulted.json.rewards)
    expect(scorerCalls()).toBe(100)
    await expectStatus(run.token, { rollouts: 100 })
    modelCalls.mockRestore()
    chunks.mockRestore()
  })

  it('judges a chunk through the JUDGE service binding, in order, each item on the rubrics sent with it', async () => {
    const run = await createRun(RUBRICS)
    const config = (await call('GET', '/run', { token: run.token })).json.config
    const snapshot = (await call('GET', '/rubrics', { token: run.token })).json
    const request = (output: string) => ({
      rollout: { id: output, input: 'What is 2+2?', output, supplemental_context: '4' },
      metadata: DEFAULT_TRAINING_METADATA,
    })
    const reply: { outcomes: ChunkOutcome[]; calls: LlmCallRecord[] } = await judgeService(env)!.judge({
      runId: run.runId,
      config,
      requestId: 'test',
      snapshots: {
        global: {
          instance_id: 'global',
          version: snapshot.rubric_version,
          rubrics: [...snapshot.anchor_rubrics, ...snapshot.adaptive_rubrics],
        },
      },
      items: [
        { instanceId: 'global', request: request('2 + 2 = 4'), maxCalls: 8 },
        { instanceId: 'global', request: request('I do not know'), maxCalls: 8 },
        { instanceId: 'nowhere', request: request('4'), maxCalls: 8 },
      ],
    })
    expect(reply.outcomes).toHaveLength(3)
    expect(reply.outcomes[0]).toMatchObject({ ok: true, judgement: { score: expect.any(Number) } })
    expect((reply.outcomes[0] as any).judgement.score).toBeGreaterThan((reply.outcomes[1] as any).judgement.score)
    expect(reply.outcomes[2]).toMatchObject({ ok: false, error: { code: 'internal' } })
    expect(reply.calls.filter((c) => c.role === 'scorer')).toHaveLength(2)
  })

  it('refuses lists of different lengths with 400, scoring nothing', async () => {
    const run = await createRun(RUBRICS)
    const res = await call('POST', '/compat/openrlhf', {
      token: run.token,
      body: { query: ['a', 'b'], prompts: ['a'], labels: ['x', 'y'] },
    })
    expectError(res, 400, 'invalid_request')
    expect(res.json.error.message).toContain('prompts has 1')
    expectError(
      await call('POST', '/compat/openrlhf', { token: run.token, body: { query: ['a'], prompts: ['a'], labels: [] } }),
      400,
      'invalid_request',
    )
    expectError(
      await call('POST', '/compat/openrlhf', { token: run.token, body: { prompts: ['a'] } }),
      400,
      'invalid_request',
    )
    expect(await ledgerRows(run.runId)).toBe(0)
    await expectStatus(run.token, { status: 'idle', rollouts: 0 })
  })
})

describe('POST /compat/slime', () => {
  it('answers a /score result whose score slime reads (--reward-key score)', async () => {
    const run = await createRun(RUBRICS)
    const res = await call('POST', '/compat/slime', {
      token: run.token,
      body: { prompt: 'What is 2+2?', response: '2 + 2 = 4', label: '4' },
    })
    expect(res.status, res.text).toBe(200)
    expect(res.json.score).toBeGreaterThan(0)
    expect(res.json.score).toBeLessThanOrEqual(1)
    expect(res.json).toMatchObject({ run_id: run.runId, rubric_version: 1, duplicate: false })
    expect(res.json.rollout_id).toMatch(/^slime-[0-9a-f]{32}$/)
    expect(res.json.criteria.map((c: { rubric_id: string }) => c.rubric_id)).toEqual(['a-correct', 'd-steps'])
    // Chat-format prompts (content as text or as parts) and non-string labels are accepted.
    const chat = await call('POST', '/compat/slime', {
      token: run.token,
      body: { prompt: [{ role: 'user', content: 'What is 2+2?' }], response: '4', label: 4 },
    })
    expect(chat.status, chat.text).toBe(200)
    const parts = await call('POST', '/compat/slime', {
      token: run.token,
      body: {
        prompt: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'What is 2+2?' },
              { type: 'image_url', image_url: { url: 'https://example.com/a.png' } },
            ],
          },
        ],
        response: '4',
        label: 4,
      },
    })
    expect(parts.status, parts.text).toBe(200)
    expect(parts.json.rollout_id).not.toBe(chat.json.rollout_id)
    expectError(
      await call('POST', '/compat/slime', { token: run.token, body: { prompt: 'x' } }),
      400,
      'invalid_request',
    )
  })
})

describe('a token in the path (/t/<token>/…), for clients that send no headers', () => {
  it('authenticates as the header would on every route; a wrong token is 401, a token in both places 400', async () => {
    const run = await createRun(RUBRICS)
    const body = { query: [PROMPTS[0] + RESPONSES[0]], prompts: [PROMPTS[0]], labels: [LABELS[0]] }
    const viaPath = await call('POST', `/t/${run.token}/compat/openrlhf`, { body })
    expect(viaPath.status, viaPath.text).toBe(200)
    expect(viaPath.json.rewards).toHaveLength(1)
    const scoped = await call('POST', `/t/${run.token}/runs/${run.runId}/compat/slime`, {
      body: { prompt: 'What is 2+2?', response: '4', label: '4' },
    })
    expect(scoped.status, scoped.text).toBe(200)
    expect(scoped.json.run_id).toBe(run.runId)
    await vi.waitFor(
      async () =>
        expect((await call('GET', `/t/${run.token}/rubric_status`)).json).toMatchObject({
          run_id: run.runId,
          rollouts: 2,
        }),
      { timeout: 5_000, interval: 50 },
    )
    // Percent-encoding is undone, as it would be in a header.
    expect((await call('GET', `/t/${encodeURIComponent(run.token)}/run`)).status).toBe(200)

    // A URL with credentials (`http://x:<token>@host/…`, as docs/security.md gives it) becomes Basic auth in requests
    // and aiohttp: the token as password under any user name (aiohttp 3.8 drops an empty one), or as the user.
    for (const credentials of [`x:${run.token}`, `:${run.token}`, `${run.token}:`]) {
      const basic = await call('POST', '/compat/openrlhf', {
        body,
        headers: { authorization: `Basic ${btoa(credentials)}` },
      })
      expect(basic.status, basic.text).toBe(200)
    }
    expectError(
      await call('POST', '/compat/openrlhf', { body, headers: { authorization: `Basic ${btoa(':rh_wrong')}` } }),
      401,
      'unauthorized',
    )

    const wrong = await call('POST', `/t/rh_not-a-token/compat/openrlhf`, { body })
    expectError(wrong, 401, 'unauthorized')
    expect(wrong.text).not.toContain('rh_not-a-token')
    expectError(
      await call('POST', `/t/${run.token}/compat/openrlhf`, { body, token: run.token }),
      400,
      'invalid_request',
    )
    // The RM surface takes the admin token in the path too; an unknown route under it is a 404 that names no token.
    expect((await call('GET', `/t/${ADMIN_TOKEN}/rm/none/healthz`)).status).toBe(404)
    const missing = await call('GET', `/t/${run.token}/no-such-route`)
    expectError(missing, 404, 'not_found')
    expect(missing.text).not.toContain(run.token)
  })
})

describe('POST /score/group', () => {
  it('scores a GRPO group and answers advantages that sum to ~0', async () => {
    const run = await createRun(RUBRICS)
    const responses = ['2 + 2 = 4, because two plus two is four.', '2 + 2 = 5', '4', 'I do not know.']
    const res = await call('POST', `/runs/${run.runId}/score/group`, {
      token: run.token,
      body: { prompt: 'What is 2+2?', responses, reference: '4' },
    })
    expect(res.status, res.text).toBe(200)
    expect(res.json.scores).toHaveLength(4)
    expect(res.json.advantages).toHaveLength(4)
    expect(Math.abs(res.json.advantages.reduce((sum: number, a: number) => sum + a, 0))).toBeLessThan(1e-9)
    expect(new Set(res.json.scores).size).toBeGreaterThan(1)
    // The best-scored response has the largest advantage.
    const best = res.json.scores.indexOf(Math.max(...res.json.scores))
    expect(res.json.advantages[best]).toBe(Math.max(...res.json.advantages))
    expect(res.json).toMatchObject({
      rubric_version: 1,
      rubric_versions: [1, 1, 1, 1],
      run_id: run.runId,
      instance_id: 'global',
    })
    expect(res.json.rollout_ids).toHaveLength(4)
    await expectStatus(run.token, { rollouts: 4 })
  })

  it('gives all-zero advantages when every response scores the same', async () => {
    const run = await createRun(RUBRICS)
    const res = await call('POST', '/score/group', {
      token: run.token,
      body: { prompt: 'What is 2+2?', responses: ['4', '4', '4'] },
    })
    expect(res.status).toBe(200)
    expect(new Set(res.json.scores).size).toBe(1)
    expect(res.json.advantages).toEqual([0, 0, 0])
    expectError(
      await call('POST', '/score/group', { token: run.token, body: { prompt: 'x', responses: [] } }),
      400,
      'invalid_request',
    )
  })
})

describe('helpers', () => {
  it('computes GRPO advantages with the sample standard deviation', () => {
    const [a, b] = groupAdvantages([1, 0])
    expect(a).toBeCloseTo(1 / Math.SQRT2 / (1 + 1e-6 * Math.SQRT2), 9)
    expect(a! + b!).toBeCloseTo(0, 12)
    expect(groupAdvantages([0.5])).toEqual([0])
    expect(groupAdvantages([])).toEqual([])
    const spread = groupAdvantages([0.1, 0.4, 0.7, 1])
    expect(spread.reduce((sum, value) => sum + value, 0)).toBeCloseTo(0, 12)
  })

  it("finds an OpenRLHF query's response: after the prompt, or its tail if the head was cut, less end tokens", () => {
    const prompt = '<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n'
    expect(responseOf(`${prompt}2 + 2 = 4<|im_end|>`, prompt)).toBe('2 + 2 = 4')
    expect(responseOf(`${prompt}4</s>`, prompt)).toBe('4')
    // Left truncation cut the prompt's head in the query, not in `prompts`.
    const long = `${'context '.repeat(100)}${prompt}`
    expect(responseOf(`${long.slice(300)}4<|endoftext|>`, long)).toBe('4')
    // A query that holds no trace of the prompt is judged whole.
    expect(responseOf('just an answer', 'an unrelated prompt')).toBe('just an answer')
    expect(responseOf('answer <|eot_id|>', '')).toBe('answer')
  })

  it('flattens chat prompts to text', () => {
    expect(promptText('plain')).toBe('plain')
    expect(
      promptText([
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hi' },
      ]),
    ).toBe('system: Be brief.\n\nuser: Hi')
    expect(
      promptText([
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is shown?' },
            { type: 'image_url' },
            { type: 'text', text: 'Be brief.' },
          ],
        },
        { role: 'assistant', content: null },
      ]),
    ).toBe('user: What is shown?\n[image]\nBe brief.\n\nassistant: ')
  })
})
