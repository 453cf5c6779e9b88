/**
 * The whole online loop on a model server that fails 30% of the time. A real `wrangler dev` (queues, Durable
 * Objects, D1) drives every agent (scorer, analyzer, summarizer, meta_summarizer, query_generator, updater) on
 * the stub LLM under a seeded fault mix: 429 with Retry-After, 500, hangs past a short timeout, replies cut at
 * max_tokens, prose instead of JSON, and bodies that are not JSON. The trainer is the TypeScript client over
 * several steps. Nothing may be lost or silently zeroed: every /score answer the client receives is either a
 * 200 whose score comes from the stub's grades or an explicit 502/503 `llm_unavailable`; every accepted
 * rollout is counted exactly once; every step completes; the failures that stay failures show in /rubric_status.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { RewardClient, type RubricUpdated } from '../../src/client/index.ts'
import {
  agentOf,
  FAULT_KINDS,
  faultMix,
  type ChatCompletionBody,
  type FaultMix,
  type LlmStub,
  type StubAgent,
  type StubFault,
  startLlmStub,
} from '../support/llm-stub.ts'
import { callJson, METADATA } from './support/http.ts'
import { startWranglerDev, type WranglerDev } from './support/wrangler-dev.ts'

const SEED = 8_104
const FAULT_RATE = 0.3
/** Short, so a hang costs a second, not a minute. */
const TIMEOUT_MS = 1_000
const MAX_ATTEMPTS = 2
const STEPS = 3
const PER_STEP = 8
const AGENTS: StubAgent[] = ['scorer', 'analyzer', 'summarizer', 'meta_summarizer', 'query_generator', 'updater']

const ANCHORS = [
  { id: 'anchor-correct', text: 'The final number equals the reference result.', weight: 2 },
  { id: 'anchor-format', text: 'The answer states the product as an equation.', weight: 1 },
]
const ADAPTIVE = [
  { id: 'adaptive-brief', text: 'The answer is one line long.', weight: 1 },
  { id: 'adaptive-digits', text: 'The number is written in digits.', weight: 0.5 },
]

let dev: WranglerDev
let stub: LlmStub
let mix: FaultMix

// ---------------------------------------------------------------------------------------------
// The stub: a cooperative model for every agent, behind the fault mix
// ---------------------------------------------------------------------------------------------

const userOf = (body: ChatCompletionBody) => body.messages.find((m) => m.role === 'user')?.content ?? ''
/** Each rollout's prompt carries the grade the stub scorer gives it: `[grade N]`. */
const gradeIn = (text: string) => Number(text.match(/\[grade (\d+)\]/)?.[1])
/**
 * Rollouts a test handles itself carry `[storm-503]`, `[storm-502]`, `[poison]` or `[cut]`; the mix leaves them alone.
 */
const specialIn = (text: string) => text.match(/\[(storm-503|storm-502|poison|cut)\]/)?.[1]

function reply(body: ChatCompletionBody): string {
  const prompt = userOf(body)
  switch (agentOf(body)) {
    case 'scorer': {
      const ids = [...prompt.matchAll(/^- ([\w.:-]+) \(weight [\d.]+\):/gm)].map((m) => m[1]!)
      return JSON.stringify({ grades: ids.map((rubric_id) => ({ rubric_id, grade: gradeIn(prompt), reason: 'stub' })) })
    }
    case 'analyzer':
      return JSON.stringify({
        overall_assessment: 'A plain arithmetic answer.',
        stage_performance: 'On track.',
        reward_hacking: { flag: false, evidence: [], severity: 'none', tactics: [] },
        advancement_strategy: 'Keep going.',
        rubric_effectiveness: 'The rubrics judged it fairly.',
        observations: ['arithmetic'],
      })
    case 'summarizer':
    case 'meta_summarizer':
      return JSON.stringify({
        executive_summary: 'Arithmetic answers, graded consistently.',
        systemic_patterns: ['arithmetic'],
        reward_hacking: { count: 0, tactics: [], examples: [] },
        rubric_meta_evaluation: 'The rubrics separate the answers.',
        evolution_plan: 'MAINTENANCE',
        memory_entry: 'arithmetic step, no hacking',
      })
    case 'query_generator':
      return JSON.stringify({ queries: ['arithmetic answers'] })
    case 'updater': {
      const adaptive = [...prompt.matchAll(/^- ([\w.:-]+) \(adaptive, weight ([\d.]+)\): (.*)$/gm)].map((m) => ({
        id: m[1]!,
        weight: Number(m[2]),
        text: m[3]!,
      }))
      return JSON.stringify({
        strategy: 'MAINTENANCE',
        consulted_memories: [],
        rationale: 'The rubrics work.',
        modifications: [],
        final_adaptive: adaptive,
      })
    }
    default:
      return 'unknown agent'
  }
}

/** Requests per special marker so far. */
const specialCalls = new Map<string, number>()

/** The special rollouts' scripts, then the seeded mix for everything else. */
function intercept(body: ChatCompletionBody): StubFault | undefined | Promise<StubFault | undefined> {
  const agent = agentOf(body)
  const special = specialIn(userOf(body))
  if (special && agent === 'scorer') {
    const n = (specialCalls.get(special) ?? 0) + 1
    specialCalls.set(special, n)
    // Every attempt of the first /score fails (the Worker makes MAX_ATTEMPTS), then the model heals.
    if (special === 'storm-503' && n <= MAX_ATTEMPTS) return { kind: 'status', status: 429, retryAfterSeconds: 1 }
    if (special === 'storm-502' && n <= MAX_ATTEMPTS)
      return { kind: 'content', text: 'I would rather not grade this one.' }
    if (special === 'cut' && n === 1) {
      // Cut right inside the last grade: "grade":10 becomes "grade":1, which JSON repair would happily accept.
      const full = reply(body)
      expect(full).toContain('"grade":10')
      return { kind: 'truncated', chars: full.lastIndexOf('"grade":10') + '"grade":1'.length }
    }
    return undefined
  }
  if (special === 'poison' && agent === 'analyzer') return { kind: 'status', status: 500 }
  return mix.intercept(body)
}

// ---------------------------------------------------------------------------------------------
// The trainer
// ---------------------------------------------------------------------------------------------

/** One HTTP answer to /score as the client received it (retries included). */
interface ScoreAnswer {
  rolloutId: string
  status: number
  body: any
  retryAfter: string | null
}
const answers: ScoreAnswer[] = []

/** The client's fetch, recording every /score answer before the client decides to retry. */
const recordingFetch: typeof fetch = async (input, init) => {
  const response = await fetch(input, init)
  if (String(input).endsWith('/score')) {
    const rolloutId = (JSON.parse(String(init?.body)) as { rollout: { id: string } }).rollout.id
    answers.push({
      rolloutId,
      status: response.status,
      body: await response
        .clone()
        .json()
        .catch(() => undefined),
      retryAfter: response.headers.get('retry-after'),
    })
  }
  return response
}

function rolloutFor(step: number, i: number, special?: string) {
  const n = 100 + step * PER_STEP + i
  // Grades 1..10; the `cut` rollout gets 10, so its truncated reply can end in a plausible "grade":1.
  const grade = special === 'cut' ? 10 : 1 + (((step * PER_STEP + i) * 7) % 10)
  return {
    rollout: {
      id: `s${step}-r${i}`,
      input: `Compute 17 * ${n}. [grade ${grade}]${special ? ` [${special}]` : ''}`,
      output: `17 * ${n} = ${17 * n}`,
      supplemental_context: String(17 * n),
    },
    grade,
  }
}

/**
 * Why a step did not finish, for the failure message. `wrangler dev` reloads the Worker when a source file
 * changes (others edit this tree), and a reload drops the local queues' in-flight messages: that is named.
 */
function stalled(status: unknown): string {
  const logs = dev.logs()
  const reload = /Reloading local server/.test(logs)
    ? 'wrangler dev reloaded the Worker during the test (a source file changed), ' +
      'which drops queued messages; rerun on a quiet tree.\n'
    : ''
  const tail = logs.split('\n').slice(-40).join('\n')
  return `${reload}step not updated: ${JSON.stringify(status)}\n--- wrangler dev ---\n${tail}`
}

beforeAll(async () => {
  stub = await startLlmStub()
  stub.respondWith(reply)
  mix = faultMix({ seed: SEED, rate: FAULT_RATE })
  stub.intercept(intercept)
  // Failed step jobs are retried at once, so a step whose analyses all failed settles quickly.
  dev = await startWranglerDev({ vars: { QUEUE_RETRY_BASE_S: '0' } })
})

afterAll(async () => {
  await dev?.stop()
  await stub?.close()
})

describe('a 30% fault mix over every agent', () => {
  it(`loses no rollout over ${STEPS} steps, never a silent 0, shows what stayed failed in /rubric_status`, async () => {
    const created = await callJson(`${dev.baseUrl}/runs`, {
      token: dev.adminToken,
      body: {
        config: {
          anchor_rubrics: ANCHORS,
          adaptive_rubrics: ADAPTIVE,
          // Two chunks per step, so the MetaSummarizer runs too.
          chunk_size: PER_STEP / 2,
          max_queries: 2,
          agents: {
            default: {
              backend: 'openai',
              base_url: stub.baseUrl,
              model: 'stub-model',
              timeout_ms: TIMEOUT_MS,
              max_attempts: MAX_ATTEMPTS,
            },
          },
        },
      },
    })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    const client = new RewardClient({
      baseUrl: dev.baseUrl,
      token: created.body.token,
      maxAttempts: 6,
      timeoutMs: 30_000,
      fetch: recordingFetch,
    })

    // The waits share what is left of the test's time, so a stalled step fails with its reason, not a bare timeout.
    const budgetEnd = Date.now() + 70_000
    const expected = new Map<string, number>()
    const statuses: RubricUpdated[] = []
    for (let step = 0; step < STEPS; step++) {
      const specials: Record<number, string> =
        step === 0 ? { 0: 'storm-503', 1: 'storm-502', 2: 'cut' } : step === 1 ? { 3: 'poison' } : {}
      const batch = Array.from({ length: PER_STEP }, (_, i) => rolloutFor(step, i, specials[i]))
      const scored = await Promise.all(
        batch.map(({ rollout }) => client.scoreAsync(rollout, { ...METADATA, current_step: step })),
      )
      for (const [i, result] of scored.entries()) {
        const { rollout, grade } = batch[i]!
        expected.set(rollout.id, grade)
        // The client's final answer: scored once, from the stub's grades.
        expect(result).toMatchObject({ rollout_id: rollout.id, step, duplicate: false })
        expect(result.score).toBeCloseTo(grade / 10, 10)
      }
      expect(await client.rolloutsComplete()).toMatchObject({ status: 'complete', step, closed: true })
      const updated = await client.rubricUpdated(Math.max(5, (budgetEnd - Date.now()) / 1_000))
      expect(updated.timed_out, stalled(updated)).toBeUndefined()
      expect(updated).toMatchObject({ status: 'updated', step, pending: 0, rollouts: PER_STEP, hacking_flags: 0 })
      for (const instance of updated.instances) expect(instance.update, JSON.stringify(instance)).toBeDefined()
      statuses.push(updated)
    }

    // Every answer the trainer saw: a score from real grades, or an explicit llm_unavailable; nothing else.
    for (const answer of answers) {
      const grade = expected.get(answer.rolloutId)!
      if (answer.status === 200) {
        expect(answer.body.score, JSON.stringify(answer)).toBeCloseTo(grade / 10, 10)
        for (const criterion of answer.body.criteria) expect(criterion).toMatchObject({ grade, reason: 'stub' })
      } else {
        expect([502, 503], JSON.stringify(answer)).toContain(answer.status)
        expect(answer.body.error.code).toBe('llm_unavailable')
        expect(answer.body).not.toHaveProperty('score')
        if (answer.status === 503) expect(answer.retryAfter).toMatch(/^\d+$/)
      }
    }
    const statusesOf = (id: string) => answers.filter((a) => a.rolloutId === id).map((a) => a.status)
    expect(statusesOf('s0-r0')).toEqual([503, 200])
    expect(statusesOf('s0-r1')).toEqual([502, 200])
    // A reply cut at max_tokens is refused and asked again, never repaired into a wrong grade.
    expect(statusesOf('s0-r2')).toEqual([200])
    expect(specialCalls.get('cut')).toBeGreaterThanOrEqual(2)
    // Accepted exactly once each: one 200 per rollout id.
    expect(
      answers
        .filter((a) => a.status === 200)
        .map((a) => a.rolloutId)
        .sort(),
    ).toEqual([...expected.keys()].sort())

    // Bookkeeping adds up: within the default budget every rollout is chosen, and each is analysed or failed.
    const total = (key: 'analysed' | 'failed') => statuses.reduce((sum, s) => sum + s.analyses[key], 0)
    expect(statuses.reduce((sum, s) => sum + s.rollouts, 0)).toBe(STEPS * PER_STEP)
    expect(total('analysed') + total('failed')).toBe(STEPS * PER_STEP)
    // The analysis that never succeeds is shown as failed in its step.
    expect(statuses[1]!.analyses.failed).toBeGreaterThanOrEqual(1)

    // The faults really hit every agent, with every kind, at about the configured rate.
    for (const agent of AGENTS)
      expect(
        mix.injected.some((f) => f.agent === agent),
        `no fault reached the ${agent}`,
      ).toBe(true)
    const kinds = new Set(mix.injected.map((f) => JSON.stringify(f.fault)))
    for (const fault of FAULT_KINDS)
      expect(kinds.has(JSON.stringify(fault)), `fault never injected: ${JSON.stringify(fault)}`).toBe(true)
    const seen = Object.values(mix.seen).reduce((sum, n) => sum + n, 0)
    expect(mix.injected.length / seen).toBeGreaterThan(FAULT_RATE - 0.1)
    expect(mix.injected.length / seen).toBeLessThan(FAULT_RATE + 0.1)
  }, 85_000)
})
