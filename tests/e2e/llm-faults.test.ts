/**
 * The scorer against a real OpenAI-compatible server (the stub) through a real `wrangler dev`:
 * what the model is sent, how malformed replies are repaired, which faults are retried, what the
 * trainer sees when every attempt fails, and the score cache.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { startLlmStub, type ChatCompletionBody, type LlmStub, type StubFault } from '../support/llm-stub.ts'
import { callJson, METADATA } from './support/http.ts'
import { startWranglerDev, type WranglerDev } from './support/wrangler-dev.ts'

const TIMEOUT_MS = 1_500
const MAX_ATTEMPTS = 3

const ANCHORS = [
  { id: 'anchor-arith', text: 'The final number equals the exact arithmetic result the prompt asks for.', weight: 2 },
  { id: 'anchor-format', text: 'The answer ends with one line of the form "Answer: <number>".', weight: 1 },
]
const ADAPTIVE = [
  { id: 'adaptive-steps', text: 'Each intermediate product is written out before the final result.', weight: 1 },
  // No id: the service names it.
  { text: 'The answer does not restate the question word for word.', weight: 0.5 },
]

let dev: WranglerDev
let stub: LlmStub
let token: string
let runId: string
/** Rubric ids and weights as the run reports them, anchors first. */
let rubrics: { id: string; text: string; weight: number }[]

let serial = 0
/** A rollout whose content is unique in this file, so the score cache never answers unless a test wants it to. */
function freshRollout(tag: string) {
  const n = 1_000 + ++serial
  return {
    id: `${tag}-${n}`,
    input: `Compute 17 * ${n}. (${tag})`,
    output: `17 * ${n} = ${17 * n}\nAnswer: ${17 * n}`,
    supplemental_context: String(17 * n),
  }
}

/** Rollouts the Worker answered as newly recorded: what /rubric_status must count. */
let recorded = 0
const score = async (rollout: ReturnType<typeof freshRollout>) => {
  const answer = await callJson(`${dev.baseUrl}/score`, {
    token,
    body: { rollout, metadata: METADATA },
    timeoutMs: 45_000,
  })
  if (answer.status === 200 && answer.body.duplicate === false) recorded++
  return answer
}
/** Waits until /rubric_status counts every rollout recorded so far (the ledger shards report within a second). */
const expectCounted = () =>
  vi.waitFor(
    async () => {
      const { status, body } = await callJson(`${dev.baseUrl}/rubric_status`, { token })
      expect(status).toBe(200)
      expect(body.run_id).toBe(runId)
      expect(body.rollouts).toBe(recorded)
    },
    { timeout: 10_000, interval: 100 },
  )

/** A reply grading every rubric of the run: `gradeFor` maps a rubric id to its grade. */
const replyGrading = (gradeFor: (id: string) => number) =>
  JSON.stringify({ grades: rubrics.map((r) => ({ rubric_id: r.id, grade: gradeFor(r.id), reason: 'scripted' })) })

const expectedScore = (gradeFor: (id: string) => number, gradeMax = 10) =>
  rubrics.reduce((sum, r) => sum + r.weight * gradeFor(r.id), 0) /
  (rubrics.reduce((sum, r) => sum + r.weight, 0) * gradeMax)

beforeAll(async () => {
  stub = await startLlmStub()
  dev = await startWranglerDev({
    vars: { KEY_A: 'secret-of-run-a', KEY_B: 'secret-of-run-b', JUDGE_KEY_NAMES: 'KEY_A,KEY_B' },
  })
  const created = await callJson(`${dev.baseUrl}/runs`, {
    token: dev.adminToken,
    body: {
      config: {
        anchor_rubrics: ANCHORS,
        adaptive_rubrics: ADAPTIVE,
        agents: {
          scorer: {
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
  token = created.body.token
  runId = created.body.run_id
  const listed = await callJson(`${dev.baseUrl}/rubrics`, { token })
  expect(listed.status).toBe(200)
  rubrics = [...listed.body.anchor_rubrics, ...listed.body.adaptive_rubrics]
  expect(rubrics.map((r) => r.text)).toEqual([...ANCHORS, ...ADAPTIVE].map((r) => r.text))
})

afterAll(async () => {
  await dev?.stop()
  await stub?.close()
})

describe('scorer prompt', () => {
  it('holds every anchor and adaptive rubric, and the rollout inside the data markers', async () => {
    const rollout = freshRollout('prompt')
    const before = stub.requests.length
    const answer = await score(rollout)
    expect(answer.status, JSON.stringify(answer.body)).toBe(200)
    expect(stub.requests.length - before).toBe(1)

    const request = stub.requests.at(-1) as ChatCompletionBody
    expect(request.model).toBe('stub-model')
    const prompt = request.messages.map((m) => m.content).join('\n')
    for (const rubric of [...ANCHORS, ...ADAPTIVE]) expect(prompt).toContain(rubric.text)
    for (const rubric of rubrics) expect(prompt).toContain(rubric.id)

    const user = request.messages.find((m) => m.role === 'user')!.content
    const blocks = [...user.matchAll(/<<<DATA-([0-9A-Za-z]+)\n([\s\S]*?)\nDATA-\1>>>/g)]
    expect(blocks.map((b) => b[2])).toEqual([rollout.input, rollout.supplemental_context, rollout.output])
    // Outside the markers the rollout's text never appears.
    expect(user.replace(/<<<DATA-([0-9A-Za-z]+)\n[\s\S]*?\nDATA-\1>>>/g, '')).not.toContain(rollout.output)

    // The stub grades every listed rubric 7 → the reward is 0.7 whatever the weights.
    expect(answer.body.score).toBeCloseTo(0.7, 10)
    expect(answer.body.criteria.map((c: { rubric_id: string }) => c.rubric_id)).toEqual(rubrics.map((r) => r.id))
    expect(answer.body).toMatchObject({ run_id: runId, rollout_id: rollout.id, cached: false, duplicate: false })
  })
})

describe('malformed replies', () => {
  it('repairs a fenced JSON reply with a trailing comma in exactly one call', async () => {
    const grades: Record<string, number> = {
      [rubrics[0]!.id]: 10,
      [rubrics[1]!.id]: 5,
      [rubrics[2]!.id]: 8,
      [rubrics[3]!.id]: 0,
    }
    const gradeFor = (id: string) => grades[id]!
    const broken = `\`\`\`json\n${replyGrading(gradeFor).replace(/\]\}$/, '],}')}\n\`\`\``
    expect(() => JSON.parse(broken)).toThrow()
    stub.script({ kind: 'content', text: broken })

    const before = stub.requests.length
    const answer = await score(freshRollout('repair'))
    expect(answer.status, JSON.stringify(answer.body)).toBe(200)
    expect(stub.requests.length - before).toBe(1)
    expect(answer.body.score).toBeCloseTo(expectedScore(gradeFor), 10)
    expect(
      Object.fromEntries(answer.body.criteria.map((c: { rubric_id: string; grade: number }) => [c.rubric_id, c.grade])),
    ).toEqual(grades)
  })
})

describe('one failed attempt, then a good reply', () => {
  const cases: [string, StubFault][] = [
    ['a reply that is not JSON', { kind: 'content', text: 'I would give this answer a solid seven out of ten.' }],
    ['429 with Retry-After: 0', { kind: 'status', status: 429, retryAfterSeconds: 0 }],
    ['500', { kind: 'status', status: 500 }],
    ['a hang past timeout_ms', { kind: 'hang' }],
    ['a 200 whose body is not JSON', { kind: 'broken-body' }],
  ]
  it.each(cases)('%s → 200 after two calls', async (_name, fault) => {
    stub.script(fault)
    const before = stub.requests.length
    const started = Date.now()
    const answer = await score(freshRollout('transient'))
    expect(answer.status, JSON.stringify(answer.body)).toBe(200)
    expect(stub.requests.length - before).toBe(2)
    expect(answer.body.score).toBeCloseTo(0.7, 10)
    expect(answer.body.cached).toBe(false)
    if (fault.kind === 'hang') expect(Date.now() - started).toBeGreaterThanOrEqual(TIMEOUT_MS - 100)
    expect(answer.body.duplicate).toBe(false)
    await expectCounted()
  })
})

describe('every attempt fails', () => {
  const cases: { name: string; fault: StubFault; expectedStatus: number }[] = [
    { name: 'three 500s', fault: { kind: 'status', status: 500 }, expectedStatus: 503 },
    {
      name: 'three non-JSON replies',
      fault: { kind: 'content', text: 'Sorry, I cannot grade this.' },
      expectedStatus: 502,
    },
  ]
  it.each(cases)(
    '$name → $expectedStatus llm_unavailable, not counted; a later retry of the id is counted once',
    async ({ fault, expectedStatus }) => {
      stub.script(...Array.from({ length: MAX_ATTEMPTS }, () => fault))
      const rollout = freshRollout('exhausted')
      const before = stub.requests.length

      const failed = await score(rollout)
      expect(failed.status, JSON.stringify(failed.body)).toBe(expectedStatus)
      expect(stub.requests.length - before).toBe(MAX_ATTEMPTS)
      expect(failed.body.error.code).toBe('llm_unavailable')
      expect(failed.body.error.message).toEqual(expect.any(String))
      expect(failed.body.error.message.length).toBeGreaterThan(0)
      expect(failed.body).not.toHaveProperty('score')
      if (expectedStatus === 503) expect(failed.headers.get('retry-after')).toMatch(/^\d+$/)

      // The stub is healthy again: the trainer's retry of the same rollout succeeds and counts once (it was not
      // recorded before: no duplicate).
      const retried = await score(rollout)
      expect(retried.status, JSON.stringify(retried.body)).toBe(200)
      expect(retried.body).toMatchObject({ rollout_id: rollout.id, duplicate: false, cached: false })
      expect(stub.requests.length - before).toBe(MAX_ATTEMPTS + 1)
      await expectCounted()

      const again = await score(rollout)
      expect(again.status).toBe(200)
      expect(again.body).toMatchObject({ rollout_id: rollout.id, duplicate: true, score: retried.body.score })
      expect(stub.requests.length - before).toBe(MAX_ATTEMPTS + 1)
      await expectCounted()
    },
  )
})

describe('score cache', () => {
  it('answers identical content under a new rollout id from the cache without calling the model', async () => {
    const gradeFor = (id: string) => (id === rubrics[0]!.id ? 9 : 3)
    stub.script({ kind: 'content', text: replyGrading(gradeFor) })
    const first = freshRollout('cache')
    const before = stub.requests.length

    const original = await score(first)
    expect(original.status, JSON.stringify(original.body)).toBe(200)
    expect(original.body.cached).toBe(false)
    expect(original.body.score).toBeCloseTo(expectedScore(gradeFor), 10)
    expect(stub.requests.length - before).toBe(1)

    const twin = await score({ ...first, id: `${first.id}-twin` })
    expect(twin.status, JSON.stringify(twin.body)).toBe(200)
    expect(twin.body).toMatchObject({
      rollout_id: `${first.id}-twin`,
      cached: true,
      duplicate: false,
      score: original.body.score,
      rubric_version: original.body.rubric_version,
    })
    expect(twin.body.criteria).toEqual(original.body.criteria)
    expect(stub.requests.length - before).toBe(1)
  })
})

describe('regressions', () => {
  it('answers a refused model request (HTTP 401) with 502 after one call and no Retry-After', async () => {
    const before = stub.requests.length
    stub.script({ kind: 'status', status: 401 })
    const res = await fetch(`${dev.baseUrl}/score`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ rollout: freshRollout('refused'), metadata: METADATA }),
    })
    const body = (await res.json()) as { error: { code: string; details: { attempts: number; failure: string } } }
    expect(res.status).toBe(502)
    expect(res.headers.get('retry-after')).toBeNull()
    expect(body.error).toMatchObject({ code: 'llm_unavailable', details: { attempts: 1, failure: 'bad_request' } })
    expect(stub.requests.length - before).toBe(1)
  })

  it("sends a role's extra headers (a literal, a named secret: Cloudflare Access), no Worker secret", async () => {
    const headers = { 'CF-Access-Client-Id': 'client-1.access', 'CF-Access-Client-Secret': { secret: 'KEY_B' } }
    const created = await callJson(`${dev.baseUrl}/runs`, {
      token: dev.adminToken,
      body: {
        config: {
          anchor_rubrics: ANCHORS,
          agents: { scorer: { backend: 'openai', base_url: stub.baseUrl, model: 'stub-model', headers } },
        },
      },
    })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    const before = stub.headers.length
    const res = await callJson(`${dev.baseUrl}/score`, {
      token: created.body.token,
      body: { rollout: freshRollout('access'), metadata: METADATA },
    })
    expect(res.status).toBe(200)
    const sent = stub.headers.slice(before)
    expect(sent.length).toBeGreaterThan(0)
    for (const request of sent)
      expect(request).toMatchObject({
        'cf-access-client-id': 'client-1.access',
        'cf-access-client-secret': 'secret-of-run-b',
      })
    const refused = await callJson(`${dev.baseUrl}/runs`, {
      token: dev.adminToken,
      body: {
        config: {
          anchor_rubrics: ANCHORS,
          agents: {
            scorer: {
              backend: 'openai',
              base_url: stub.baseUrl,
              model: 'stub-model',
              headers: { 'X-Key': { secret: 'ADMIN_TOKEN' } },
            },
          },
        },
      },
    })
    expect(refused.status).toBe(400)
    expect(refused.body.error.message).toContain('agents.scorer.headers.X-Key may not name "ADMIN_TOKEN"')
  })

  it('gives each run its own API key even when model and base URL are the same', async () => {
    const runWithKey = async (keyEnv: string) => {
      const created = await callJson(`${dev.baseUrl}/runs`, {
        token: dev.adminToken,
        body: {
          config: {
            anchor_rubrics: ANCHORS,
            agents: { scorer: { backend: 'openai', base_url: stub.baseUrl, model: 'stub-model', api_key_env: keyEnv } },
          },
        },
      })
      expect(created.status, JSON.stringify(created.body)).toBe(201)
      return created.body.token as string
    }
    const tokenA = await runWithKey('KEY_A')
    const tokenB = await runWithKey('KEY_B')
    for (const [runToken, tag] of [
      [tokenA, 'key-a'],
      [tokenB, 'key-b'],
    ] as const) {
      const before = stub.authorizations.length
      const res = await callJson(`${dev.baseUrl}/score`, {
        token: runToken,
        body: { rollout: freshRollout(tag), metadata: METADATA },
      })
      expect(res.status).toBe(200)
      expect(stub.authorizations.slice(before)).toEqual([
        `Bearer ${tag === 'key-a' ? 'secret-of-run-a' : 'secret-of-run-b'}`,
      ])
    }
  })
})
