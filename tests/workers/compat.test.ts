import { env } from 'cloudflare:workers'
import { describe, expect, it } from 'vitest'
import { DEFAULT_TRAINING_METADATA, groupAdvantages, promptText } from '../../workers/routes/compat.ts'
import { call, createRun, expectStatus, ledgerRows } from './helpers.ts'

const RUBRICS = {
  anchor_rubrics: [{ id: 'a-correct', text: 'The final answer is correct.', weight: 2 }],
  adaptive_rubrics: [{ id: 'd-steps', text: 'Shows the key steps.' }],
}

const PROMPTS = ['<|user|>What is 2+2?<|assistant|>', '<|user|>What is 3*3?<|assistant|>', '<|user|>Capital of France?<|assistant|>'] as const
const RESPONSES = ['2 + 2 = 4', '3 * 3 = 6', 'Paris is the capital of France.'] as const
const LABELS = ['4', '9', 'Paris'] as const

function expectError(res: { status: number; json: any }, status: number, code: string) {
  expect(res.status, JSON.stringify(res.json)).toBe(status)
  expect(res.json.error.code).toBe(code)
  expect(res.json.error.message).toMatch(/\w{3,}/)
}

describe('POST /compat/openrlhf', () => {
  it('scores 3 samples: 3 rewards in [0,1], scores alike, per-sample extra_logs; counted as 3 rollouts of the run', async () => {
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

  it('grades the response without its prompt prefix, with the label as reference and the default metadata', async () => {
    const run = await createRun(RUBRICS)
    const direct = await call('POST', '/score', {
      token: run.token,
      body: { rollout: { id: 'direct', input: PROMPTS[0], output: RESPONSES[0], supplemental_context: LABELS[0] }, metadata: DEFAULT_TRAINING_METADATA },
    })
    expect(direct.status).toBe(200)
    // Same content → the judgement cache answers: proof that the trainer's query was split as /score was called.
    const viaOpenRlhf = await call('POST', '/compat/openrlhf', { token: run.token, body: { query: [PROMPTS[0] + RESPONSES[0]], prompts: [PROMPTS[0]], labels: [LABELS[0]] } })
    expect(viaOpenRlhf.json).toMatchObject({ rewards: [direct.json.score], extra_logs: { cached: [1], duplicate: [0] } })
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

  it('refuses lists of different lengths with 400, scoring nothing', async () => {
    const run = await createRun(RUBRICS)
    const res = await call('POST', '/compat/openrlhf', { token: run.token, body: { query: ['a', 'b'], prompts: ['a'], labels: ['x', 'y'] } })
    expectError(res, 400, 'invalid_request')
    expect(res.json.error.message).toContain('prompts has 1')
    expectError(await call('POST', '/compat/openrlhf', { token: run.token, body: { query: ['a'], prompts: ['a'], labels: [] } }), 400, 'invalid_request')
    expectError(await call('POST', '/compat/openrlhf', { token: run.token, body: { prompts: ['a'] } }), 400, 'invalid_request')
    expect(await ledgerRows(run.runId)).toBe(0)
    await expectStatus(run.token, { status: 'idle', rollouts: 0 })
  })
})

describe('POST /compat/slime', () => {
  it('answers a /score result whose score slime reads (--reward-key score)', async () => {
    const run = await createRun(RUBRICS)
    const res = await call('POST', '/compat/slime', { token: run.token, body: { prompt: 'What is 2+2?', response: '2 + 2 = 4', label: '4' } })
    expect(res.status, res.text).toBe(200)
    expect(res.json.score).toBeGreaterThan(0)
    expect(res.json.score).toBeLessThanOrEqual(1)
    expect(res.json).toMatchObject({ run_id: run.runId, rubric_version: 1, duplicate: false })
    expect(res.json.rollout_id).toMatch(/^slime-[0-9a-f]{32}$/)
    expect(res.json.criteria.map((c: { rubric_id: string }) => c.rubric_id)).toEqual(['a-correct', 'd-steps'])
    // Chat-format prompts and non-string labels are accepted.
    const chat = await call('POST', '/compat/slime', { token: run.token, body: { prompt: [{ role: 'user', content: 'What is 2+2?' }], response: '4', label: 4 } })
    expect(chat.status, chat.text).toBe(200)
    expectError(await call('POST', '/compat/slime', { token: run.token, body: { prompt: 'x' } }), 400, 'invalid_request')
  })
})

describe('POST /score/group', () => {
  it('scores a GRPO group and answers advantages that sum to ~0', async () => {
    const run = await createRun(RUBRICS)
    const responses = ['2 + 2 = 4, because two plus two is four.', '2 + 2 = 5', '4', 'I do not know.']
    const res = await call('POST', `/runs/${run.runId}/score/group`, { token: run.token, body: { prompt: 'What is 2+2?', responses, reference: '4' } })
    expect(res.status, res.text).toBe(200)
    expect(res.json.scores).toHaveLength(4)
    expect(res.json.advantages).toHaveLength(4)
    expect(Math.abs(res.json.advantages.reduce((sum: number, a: number) => sum + a, 0))).toBeLessThan(1e-9)
    expect(new Set(res.json.scores).size).toBeGreaterThan(1)
    // The best-scored response has the largest advantage.
    const best = res.json.scores.indexOf(Math.max(...res.json.scores))
    expect(res.json.advantages[best]).toBe(Math.max(...res.json.advantages))
    expect(res.json).toMatchObject({ rubric_version: 1, rubric_versions: [1, 1, 1, 1], run_id: run.runId, instance_id: 'global' })
    expect(res.json.rollout_ids).toHaveLength(4)
    await expectStatus(run.token, { rollouts: 4 })
  })

  it('gives all-zero advantages when every response scores the same', async () => {
    const run = await createRun(RUBRICS)
    const res = await call('POST', '/score/group', { token: run.token, body: { prompt: 'What is 2+2?', responses: ['4', '4', '4'] } })
    expect(res.status).toBe(200)
    expect(new Set(res.json.scores).size).toBe(1)
    expect(res.json.advantages).toEqual([0, 0, 0])
    expectError(await call('POST', '/score/group', { token: run.token, body: { prompt: 'x', responses: [] } }), 400, 'invalid_request')
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

  it('flattens chat prompts to text', () => {
    expect(promptText('plain')).toBe('plain')
    expect(promptText([{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }])).toBe('system: Be brief.\n\nuser: Hi')
  })
})

/** Polls `check` until it holds (work the Worker does after its response). */
async function waitFor(check: () => Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time')
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}
