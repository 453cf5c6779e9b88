/**
 * Each trainer's own reward-sending code (re-implemented faithfully in ./support/trainers.ts from its published
 * source) against a real `wrangler dev`, with a loopback OpenAI-compatible judge that can be slow or fail:
 * single samples, batches, empty shards among several URLs, 64 at once, a failing judge (an error, never a 0),
 * OpenRLHF ≤ 0.9's whole batch in one request, and a run that advances its steps without `/complete`.
 */
import { execFile } from 'node:child_process'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { startLlmStub, type LlmStub } from '../support/llm-stub.ts'
import { callJson } from './support/http.ts'
import { openRlhfLegacy, openRlhfSample, slimeRemoteRm, slimeRemoteRmAll, TrainerError } from './support/trainers.ts'
import { startWranglerDev, type WranglerDev } from './support/wrangler-dev.ts'

const RUBRICS = {
  anchor_rubrics: [{ id: 'a-correct', text: 'The final answer is correct.', weight: 2 }],
  adaptive_rubrics: [{ id: 'd-steps', text: 'Shows the key steps.' }],
}
/** Waits shortened so a failing judge is seen in seconds; the sequence of tries is the trainer's own. */
const QUICK = { retryWaitMs: 20, backoffScale: 0.001 }
const run = promisify(execFile)
const ROOT = path.join(import.meta.dirname, '../..')
const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

let dev: WranglerDev
let stub: LlmStub
/** The judge's latency and whether it fails, per test. */
let judgeLatencyMs = 0
let judgeFails = false
let inFlight = 0
let maxInFlight = 0
let judgeCalls = 0
/** A run whose scorer is the stub, addressed with its token in the path as header-less trainers do. */
let base: string

let serial = 0
function sample(tag: string, size = 0) {
  const n = ++serial
  const prompt = `<|user|>${tag} #${n}: what is ${n} + ${n}?<|assistant|>`
  return {
    prompt,
    response: `${n} + ${n} = ${2 * n}. ${'Worked through step by step. '.repeat(Math.ceil(size / 31))}`.slice(
      0,
      Math.max(size, 20),
    ),
    label: String(2 * n),
  }
}

beforeAll(async () => {
  stub = await startLlmStub()
  stub.intercept(async () => {
    judgeCalls++
    inFlight++
    maxInFlight = Math.max(maxInFlight, inFlight)
    try {
      if (judgeLatencyMs > 0) await delay(judgeLatencyMs)
      return judgeFails ? { kind: 'status', status: 500 } : undefined
    } finally {
      inFlight--
    }
  })
  dev = await startWranglerDev()
  const created = await callJson(`${dev.baseUrl}/runs`, {
    token: dev.adminToken,
    body: {
      config: {
        ...RUBRICS,
        agents: {
          scorer: {
            backend: 'openai',
            base_url: stub.baseUrl,
            model: 'stub-model',
            max_attempts: 2,
            timeout_ms: 10_000,
          },
        },
      },
    },
  })
  expect(created.status, JSON.stringify(created.body)).toBe(201)
  base = `${dev.baseUrl}/t/${created.body.token}/runs/${created.body.run_id}`
})

afterAll(async () => {
  await dev?.stop()
  await stub?.close()
})

describe('OpenRLHF ≤ 0.9 (--remote_rm_url: the whole batch, split over the URLs)', () => {
  it('single, batch over 2 URLs, empty shard of 3 URLs: rewards in [0, 1], extra_logs keyed by server 1', async () => {
    const one = sample('single')
    const single = await openRlhfLegacy(
      [`${base}/compat/openrlhf`],
      [one.prompt + one.response],
      [one.prompt],
      [one.label],
    )
    expect(single.rewards).toEqual([0.7])
    const batch = Array.from({ length: 64 }, () => sample('batch'))
    const twoUrls = await openRlhfLegacy(
      [`${base}/compat/openrlhf`, `${base}/compat/openrlhf`],
      batch.map((s) => s.prompt + s.response),
      batch.map((s) => s.prompt),
      batch.map((s) => s.label),
    )
    expect(twoUrls.rewards).toHaveLength(64)
    expect(twoUrls.extraLogs).toMatchObject({
      rubric_version: expect.any(Array),
      cached: expect.any(Array),
      duplicate: expect.any(Array),
    })
    expect(twoUrls.extraLogs!.rubric_version).toHaveLength(64)
    // 2 samples over 3 URLs: slices of 1, 1 and 0 — the third server answers empty lists with every key.
    const pair = [sample('shard'), sample('shard')]
    const three = await openRlhfLegacy(
      Array.from({ length: 3 }, () => `${base}/compat/openrlhf`),
      pair.map((s) => s.prompt + s.response),
      pair.map((s) => s.prompt),
      pair.map((s) => s.label),
    )
    expect(three.rewards).toHaveLength(2)
    expect(three.extraLogs!.rubric_version).toHaveLength(2)
    expect(three.answers[2]).toEqual({
      rewards: [],
      scores: [],
      extra_logs: { rubric_version: [], cached: [], duplicate: [] },
    })
  })

  it('1,024 samples of 4 KB in one request, 1 s judge: 1,024 rewards from 30 invocations side by side', async () => {
    const batch = Array.from({ length: 1_024 }, () => sample('big', 4_096))
    judgeLatencyMs = 1_000
    maxInFlight = 0
    const callsBefore = judgeCalls
    const started = Date.now()
    try {
      const result = await openRlhfLegacy(
        [`${base}/compat/openrlhf`],
        batch.map((s) => s.prompt + s.response),
        batch.map((s) => s.prompt),
        batch.map((s) => s.label),
        { tries: 1 },
      )
      const seconds = (Date.now() - started) / 1_000
      console.log(
        `OpenRLHF ≤ 0.9 shape: 1,024 samples of 4 KB, 1 s judge: answered in ${seconds.toFixed(1)} s; ` +
          `judge calls ${judgeCalls - callsBefore}, at most ${maxInFlight} in flight`,
      )
      expect(result.rewards).toHaveLength(1_024)
      expect(new Set(result.rewards)).toEqual(new Set([0.7]))
      // Judged once each, by 30 invocations at once, each 4 at a time (the scorer's default concurrency, under its
      // 6 connections): 1,024 ÷ 120 judge latencies rather than 1,024 ÷ 4.
      expect(judgeCalls - callsBefore).toBe(1_024)
      expect(maxInFlight).toBe(30 * 4)
    } finally {
      judgeLatencyMs = 0
    }
  }, 180_000)

  it('a failing judge: 503 each try, and after its 5 tries the trainer raises — never a reward of 0', async () => {
    judgeFails = true
    try {
      const one = sample('fail')
      const logs: string[] = []
      const failed = await openRlhfLegacy(
        [`${base}/compat/openrlhf`],
        [one.prompt + one.response],
        [one.prompt],
        [one.label],
        { ...QUICK, log: (line) => logs.push(line) },
      ).catch((error: unknown) => error)
      expect(failed).toBeInstanceOf(TrainerError)
      expect(String((failed as Error).message)).toMatch(/5 times/)
      expect(logs.join('\n')).toMatch(/503/)
    } finally {
      judgeFails = false
    }
  })
})

describe('OpenRLHF ≥ 0.9.1 (--reward.remote_url: one sample per request)', () => {
  it('single, an empty shard among 3 URLs, and 64 at once', async () => {
    const one = sample('current')
    const single = await openRlhfSample([`${base}/compat/openrlhf`], one.prompt + one.response, one.prompt, one.label)
    expect(single?.reward).toEqual([0.7])
    expect(single?.extraLogs).toMatchObject({ rubric_version: [expect.any(Number)] })
    const sharded = await openRlhfSample(
      Array.from({ length: 3 }, () => `${base}/compat/openrlhf`),
      one.prompt + one.response,
      one.prompt,
      one.label,
    )
    expect(sharded?.reward).toEqual([0.7])
    expect(sharded?.answers.slice(1)).toEqual(
      [0, 0].map(() => ({ rewards: [], scores: [], extra_logs: { rubric_version: [], cached: [], duplicate: [] } })),
    )
    const many = Array.from({ length: 64 }, () => sample('concurrent'))
    const rewards = await Promise.all(
      many.map((s) =>
        openRlhfSample(
          [`${base}/compat/openrlhf`, `${base}/compat/openrlhf`],
          s.prompt + s.response,
          s.prompt,
          s.label,
        ),
      ),
    )
    expect(rewards.map((r) => (r!.reward as number[])[0])).toEqual(many.map(() => 0.7))
  })

  it('a failing judge leaves the reward None (null), never 0', async () => {
    judgeFails = true
    try {
      const one = sample('current-fail')
      expect(
        await openRlhfSample([`${base}/compat/openrlhf`], one.prompt + one.response, one.prompt, one.label, QUICK),
      ).toBeNull()
    } finally {
      judgeFails = false
    }
  })
})

describe('slime (--rm-type remote_rm --rm-url … --reward-key score)', () => {
  it('single with a chat prompt of content parts, 64 at once, and the TypeError with no --reward-key', async () => {
    const one = sample('slime')
    const single = await slimeRemoteRm(
      `${base}/compat/slime`,
      {
        prompt: [
          {
            role: 'user',
            content: [
              { type: 'text', text: one.prompt },
              { type: 'image_url', image_url: { url: 'https://example.com/a.png' } },
            ],
          },
        ],
        response: one.response,
        label: one.label,
      },
      { rewardKey: 'score' },
    )
    expect(single.reward).toBe(0.7)
    const many = Array.from({ length: 64 }, () => sample('slime-many'))
    const results = await slimeRemoteRmAll(`${base}/compat/slime`, many, { rewardKey: 'score' })
    expect(results.map((r) => r.reward)).toEqual(many.map(() => 0.7))
    const noKey = await slimeRemoteRm(`${base}/compat/slime`, sample('slime-nokey'), {}).catch(
      (error: unknown) => error,
    )
    expect(noKey).toMatchObject({ type: 'TypeError' })
  })

  it('a failing judge: slime retries, then raises the last error — never a reward of 0', async () => {
    judgeFails = true
    try {
      const failed = await slimeRemoteRm(`${base}/compat/slime`, sample('slime-fail'), {
        rewardKey: 'score',
        ...QUICK,
      }).catch((error: unknown) => error)
      expect(failed).toBeInstanceOf(TrainerError)
      expect(failed).toMatchObject({ status: 503 })
    } finally {
      judgeFails = false
    }
  })
})

/** Runs a recipe through tests/e2e/support/trainer_harness.py the way its trainer calls it; the harness's JSON line. */
async function harness(mode: 'verl-naive' | 'trl', recipe: string, input: unknown, url: string): Promise<any> {
  const dir = await mkdtemp(path.join(tmpdir(), 'rh-recipe-'))
  const file = path.join(dir, mode === 'trl' ? 'batch.json' : 'samples.jsonl')
  await writeFile(
    file,
    mode === 'trl' ? JSON.stringify(input) : (input as unknown[]).map((line) => JSON.stringify(line)).join('\n'),
  )
  const { stdout } = await run(
    'python3',
    [
      path.join(ROOT, 'tests/e2e/support/trainer_harness.py'),
      mode,
      path.join(ROOT, 'clients/python/recipes', recipe),
      file,
    ],
    {
      cwd: ROOT,
      timeout: 120_000,
      env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1', REWARD_HARNESS_URL: url },
    },
  )
  return JSON.parse(stdout.trim().split('\n').at(-1)!)
}

describe('the Python recipes, called as verl and TRL call them', () => {
  it('verl (naive manager, online rubrics): one compute_score per sample, the same keys for every sample', async () => {
    const samples = Array.from({ length: 4 }, () => sample('verl')).map((s, i) => ({
      data_source: 'math',
      solution_str: s.response,
      ground_truth: s.label,
      extra_info: { question: s.prompt, index: i },
    }))
    const out = await harness('verl-naive', 'verl_online.py', samples, base)
    expect(out.ok, JSON.stringify(out)).not.toBe(false)
    expect(out.rewards).toEqual([0.7, 0.7, 0.7, 0.7])
    expect(Object.keys(out.reward_extra_info).sort()).toEqual(['rubric_version', 'score'])
  })

  it('TRL: 32 completions in 4 groups, 1 s judge, scored at once; trainer_state.global_step is the step', async () => {
    const prompts = Array.from({ length: 4 }, () => sample('trl').prompt)
    const batch = {
      prompts: prompts.flatMap((prompt) => Array.from({ length: 8 }, () => [{ role: 'user', content: prompt }])),
      completions: prompts.flatMap((_, g) =>
        Array.from({ length: 8 }, (_, i) => [{ role: 'assistant', content: `answer ${g}.${i}` }]),
      ),
      global_step: 7,
      max_steps: 100,
    }
    judgeLatencyMs = 1_000
    maxInFlight = 0
    const callsBefore = judgeCalls
    try {
      const out = await harness('trl', 'trl_reward.py', batch, base)
      console.log(`TRL recipe: 32 completions in 4 groups, 1 s judge: ${out.wall_s} s`)
      expect(out.rewards).toHaveLength(32)
      expect(out.rewards.every((reward: number) => reward === 0.7)).toBe(true)
      // The 4 groups judged side by side, each 4 at a time (the scorer's default concurrency), each answer once.
      expect(judgeCalls - callsBefore).toBe(32)
      expect(maxInFlight).toBe(4 * 4)
    } finally {
      judgeLatencyMs = 0
    }
  }, 60_000)
})

describe('steps without /complete', () => {
  it('a run fed only via /compat/openrlhf reaches step 3 with updates, each step closed by the idle gap', async () => {
    const created = await callJson(`${dev.baseUrl}/runs`, {
      token: dev.adminToken,
      body: { config: { ...RUBRICS, close_after_idle_s: 2 } },
    })
    expect(created.status).toBe(201)
    const url = `${dev.baseUrl}/t/${created.body.token}/compat/openrlhf`
    const status = async () => (await callJson(`${dev.baseUrl}/rubric_status`, { token: created.body.token })).body
    for (let step = 0; step < 4; step++) {
      const burst = Array.from({ length: 16 }, () => sample(`idle-${step}`))
      const { rewards } = await openRlhfLegacy(
        [url, url],
        burst.map((s) => s.prompt + s.response),
        burst.map((s) => s.prompt),
        burst.map((s) => s.label),
      )
      expect(rewards).toHaveLength(16)
      if (step === 3) break
      // The trainer trains: no rollout for longer than the gap; the step closes and its update runs.
      await vi.waitFor(
        async () => expect(await status()).toMatchObject({ step, status: 'updated', closed_by: 'idle' }),
        { timeout: 60_000, interval: 200 },
      )
    }
    const last = await vi.waitFor(
      async () => {
        const now = await status()
        expect(now).toMatchObject({ step: 3, status: 'collecting', rollouts: 16 })
        return now
      },
      { timeout: 10_000, interval: 100 },
    )
    expect(last.closes_when).toMatch(/after 2 s without a new rollout/)
    expect(last.rubric_version).toBeGreaterThanOrEqual(2)
  }, 300_000)
})
