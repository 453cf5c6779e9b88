/**
 * Two trainers at once on one run under a real `wrangler dev` (issue 37): OpenRLHF's batches on `/compat/openrlhf`
 * and a batch client on `/score/batch`, `rollouts_per_step: 8`, the rubrics changing every step, the run archived.
 * Shows that (i) no 5xx reaches a client but this project's JSON 503 with a real Retry-After (the runtime's
 * plain-text "Your worker restarted mid-request" 503 is counted wherever it appears), (ii) the archive holds exactly
 * what the trainers were answered (step, rubric version, score per rollout id), and (iii) each archived step of an
 * instance was scored on one rubric version.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { groupBy } from '../../src/collections/index.ts'
import { sha256Hex } from '../../src/hash/index.ts'
import { addRubricOnEveryUpdate, startLlmStub, type LlmStub } from '../support/llm-stub.ts'
import { callJson, callJsonRetrying, METADATA } from './support/http.ts'
import { openRlhfLegacy } from './support/trainers.ts'
import { startWranglerDev, type WranglerDev } from './support/wrangler-dev.ts'

const RUBRICS = {
  anchor_rubrics: [{ id: 'a-correct', text: 'The final answer is correct.', weight: 2 }],
  adaptive_rubrics: [{ id: 'd-steps', text: 'Shows the key steps.' }],
}
/** Rounds each trainer runs; each round is 4 requests of 4 rollouts at once per trainer (32 rollouts, 4 steps). */
const ROUNDS = 16
/** Requests a trainer has in flight per round, and rollouts per request (the batches of 4). */
const REQUESTS_PER_ROUND = 4
const BATCH = 4
/** What the updater stub takes per update: long enough that later steps collect while an update commits. */
const UPDATE_MS = 300
/** OpenRLHF's retry wait shortened (its sequence of tries kept) so a lost request costs milliseconds. */
const QUICK = { retryWaitMs: 20 }

let dev: WranglerDev
let stub: LlmStub

/** One 5xx a client saw: where, and whether it was this project's JSON 503 with a Retry-After of at least 1 s. */
interface ServerError {
  path: string
  status: number
  contentType: string
  retryAfter: string | null
  body: string
}
const serverErrors: ServerError[] = []
/** Requests whose connection failed before any answer (each client retried them as a network error). */
const transportErrors: string[] = []
const realFetch = globalThis.fetch

/**
 * Every client in this file (the trainers' helpers, callJson) calls the global fetch: wrapping it sees each answer
 * exactly as the trainer got it, retries included, without a proxy in front of wrangler dev.
 */
function observeFetch(): void {
  globalThis.fetch = async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = new URL(input instanceof Request ? input.url : String(input))
    let response: Response
    try {
      response = await realFetch(input, init)
    } catch (error) {
      if (!url.pathname.endsWith('/healthz')) transportErrors.push(`${url.pathname}: ${String(error)}`)
      throw error
    }
    if (response.status >= 500) {
      serverErrors.push({
        path: url.pathname.replace(/\/t\/[^/]+/, '/t/<token>'),
        status: response.status,
        contentType: response.headers.get('content-type') ?? '',
        retryAfter: response.headers.get('retry-after'),
        body: (await response.clone().text()).slice(0, 200),
      })
    }
    return response
  }
}

/**
 * This project's own 503: JSON with an error code, and a Retry-After a client can wait on (≥ 1 s). wrangler dev's
 * ProxyWorker answers its plain-text "Your worker restarted mid-request" (Retry-After: 0) for any POST whose fetch to
 * the Worker's runtime failed, restart or not: it compares the request's URL, path included, with the runtime's bare
 * origin, so on every path but `/` a lost connection reads as a restart.
 */
function isOwnRetryable(error: ServerError): boolean {
  if (error.status !== 503 || !error.contentType.startsWith('application/json')) return false
  if (!(Number(error.retryAfter) >= 1)) return false
  try {
    return typeof (JSON.parse(error.body) as { error?: { code?: unknown } }).error?.code === 'string'
  } catch {
    return false
  }
}

beforeAll(async () => {
  stub = await startLlmStub()
  // Every update adds a rubric, so each closed step makes a new version; the scorer stays the embedded mock.
  addRubricOnEveryUpdate(stub, UPDATE_MS)
  dev = await startWranglerDev()
  observeFetch()
})

afterAll(async () => {
  globalThis.fetch = realFetch
  await dev?.stop()
  await stub?.close()
})

/** What a trainer was answered for one rollout; `step` is absent where the protocol's answer has none (OpenRLHF). */
interface Answered {
  rollout_id: string
  step?: number
  rubric_version: number
  score: number
}

describe('two trainers at once, rollouts_per_step 8, rubrics changing every step', () => {
  it('no foreign 5xx; the archive holds exactly what was answered; one rubric version per archived step', async () => {
    const role = { backend: 'openai', base_url: stub.baseUrl, model: 'stub-model', max_attempts: 3, timeout_ms: 20_000 }
    const created = await callJson(`${dev.baseUrl}/runs`, {
      token: dev.adminToken,
      body: {
        config: {
          ...RUBRICS,
          rollouts_per_step: 8,
          rubric_update_frequency: 1,
          archive: true,
          agents: { updater: role },
        },
      },
    })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    const token = created.body.token as string
    const base = `${dev.baseUrl}/t/${token}/runs/${created.body.run_id}`

    const started = Date.now()
    const [openrlhf, batch] = await Promise.all([openRlhfTrainer(base), scoreBatchTrainer(token)])
    const answered = [...openrlhf, ...batch]
    const seconds = ((Date.now() - started) / 1_000).toFixed(1)

    // Every step closes at 8 rollouts, so the last one closes with the last answer; the shards archive a step once
    // its update has told them. Wait until no update is pending and the archive holds every answered rollout (or,
    // with the updates all done, stopped growing: then what is missing is missing for good).
    let archive = await readArchive(token)
    await vi
      .waitFor(
        async () => {
          const status = (await callJson(`${dev.baseUrl}/rubric_status`, { token })).body
          const before = archive.rollouts.size
          archive = await readArchive(token)
          expect(status.pending === 0 && status.status !== 'updating').toBe(true)
          expect(archive.rollouts.size === answered.length || archive.rollouts.size === before).toBe(true)
        },
        { timeout: 60_000, interval: 1_000 },
      )
      .catch(() => {})

    const foreign = serverErrors.filter((error) => !isOwnRetryable(error))
    const mismatches = answered.flatMap((answer) => {
      const row = archive.rollouts.get(answer.rollout_id)
      const expected = { ...answer, step: answer.step ?? row?.step }
      const same =
        row !== undefined &&
        row.step === expected.step &&
        row.rubric_version === answer.rubric_version &&
        row.score === answer.score
      return same ? [] : [{ answered: answer, archived: row ?? null }]
    })
    const differing = (field: 'step' | 'rubric_version' | 'score') =>
      mismatches.filter(
        ({ answered, archived }) => archived && answered[field] !== undefined && answered[field] !== archived[field],
      ).length
    const mixedSteps = [...groupBy([...archive.rollouts.values()], (row) => `${row.step}\u0000${row.instance_id}`)]
      .map(([key, rows]) => ({ key, versions: [...new Set(rows.map((row) => row.rubric_version))].sort() }))
      .filter(({ versions }) => versions.length > 1)
    const steps = new Set([...archive.rollouts.values()].map((row) => row.step)).size
    console.log(
      `two trainers: ${answered.length} rollouts answered in ${seconds} s; 5xx seen ${serverErrors.length} ` +
        `(not this project's JSON 503: ${foreign.length}: ${summarise(foreign)}); connection errors ` +
        `${transportErrors.length}; archived ${archive.rollouts.size} rollouts over ${steps} steps; answers ≠ ` +
        `archive: ${mismatches.length} (missing ${mismatches.filter((m) => !m.archived).length}, ` +
        `step ${differing('step')}, version ${differing('rubric_version')}, score ${differing('score')}); ` +
        `archived steps with more than one rubric version: ${mixedSteps.length}`,
    )

    expect(new Set(answered.map((answer) => answer.rollout_id)).size).toBe(ROUNDS * REQUESTS_PER_ROUND * BATCH * 2)
    // (i) The runtime's own 503s ("Your worker restarted mid-request", Retry-After: 0) and any other non-JSON 5xx.
    expect(foreign, summarise(foreign)).toEqual([])
    // (ii) What each trainer was told is what the archive keeps.
    expect(
      mismatches.slice(0, 5),
      `${mismatches.length} of ${answered.length} answers differ from the archive`,
    ).toEqual([])
    // (iii) A counted step is scored on one rubric version per instance.
    expect(
      mixedSteps.slice(0, 5),
      `${mixedSteps.length} of ${steps} archived steps hold more than one rubric version`,
    ).toEqual([])
  }, 240_000)
})

/**
 * OpenRLHF ≤ 0.9 with four reward URLs: each round, 16 samples split into 4 requests of 4 sent at once. Its answer
 * has no step; its rollout ids are the Worker's content hashes of each query.
 */
async function openRlhfTrainer(base: string): Promise<Answered[]> {
  const url = `${base}/compat/openrlhf`
  const answered: Answered[] = []
  for (let round = 0; round < ROUNDS; round++) {
    const n = REQUESTS_PER_ROUND * BATCH
    const prompts = Array.from({ length: n }, (_, i) => `<|user|>OpenRLHF r${round} #${i}: what is ${i} + ${i}?`)
    const queries = prompts.map((prompt, i) => `${prompt}<|assistant|>${2 * i}, worked out in round ${round}.`)
    const result = await openRlhfLegacy(
      Array.from({ length: REQUESTS_PER_ROUND }, () => url),
      queries,
      prompts,
      prompts.map((_, i) => String(2 * i)),
      QUICK,
    )
    const versions = result.extraLogs!.rubric_version!
    for (const [i, query] of queries.entries()) {
      answered.push({
        rollout_id: `orlhf-${(await sha256Hex(query)).slice(0, 32)}`,
        rubric_version: versions[i]!,
        score: result.rewards[i]!,
      })
    }
  }
  return answered
}

/**
 * A client of `/score/batch`: each round, 4 batches of 4 at once; a 503 is sent again after its Retry-After, and an
 * item answered with an error is sent again in the next batch, as a trainer that needs every reward does.
 */
async function scoreBatchTrainer(token: string): Promise<Answered[]> {
  const answered: Answered[] = []
  for (let round = 0; round < ROUNDS; round++) {
    const sends = Array.from({ length: REQUESTS_PER_ROUND }, async (_, b) => {
      let items = Array.from({ length: BATCH }, (_, k) => {
        const id = `batch-r${round}-b${b}-k${k}`
        return {
          rollout: {
            id,
            input: `Prompt ${id}: what is ${k} + ${k}?`,
            output: `${2 * k}`,
            supplemental_context: `${2 * k}`,
          },
          metadata: { ...METADATA, current_step: round },
        }
      })
      for (let attempt = 1; items.length > 0; attempt++) {
        const answer = await callJsonRetrying(`${dev.baseUrl}/score/batch`, { token, body: { items } })
        expect(answer.status, JSON.stringify(answer.body)).toBe(200)
        const results = answer.body.results as Array<Answered | { error: { code: string } }>
        for (const result of results)
          if (!('error' in result))
            answered.push({
              rollout_id: result.rollout_id,
              step: result.step!,
              rubric_version: result.rubric_version,
              score: result.score,
            })
        const failed = items.filter((_, i) => 'error' in results[i]!)
        expect(attempt < 5 || failed.length === 0, JSON.stringify(results)).toBe(true)
        items = failed
      }
    })
    await Promise.all(sends)
  }
  return answered
}

/** One archived rollout: what the test compares. */
interface ArchivedRow {
  step: number
  instance_id: string
  rubric_version: number
  score: number
}

/** The run's archive through its route, every page (`more` lines), rollouts by id. */
async function readArchive(token: string): Promise<{ rollouts: Map<string, ArchivedRow> }> {
  const rollouts = new Map<string, ArchivedRow>()
  let after: string | undefined
  do {
    const query = after === undefined ? '' : `?after=${encodeURIComponent(after)}`
    const response = await realFetch(`${dev.baseUrl}/archive${query}`, {
      headers: { authorization: `Bearer ${token}` },
    })
    expect(response.status).toBe(200)
    after = undefined
    for (const line of (await response.text()).split('\n')) {
      if (line.trim() === '') continue
      const parsed = JSON.parse(line)
      if (parsed.kind === 'more') after = parsed.after
      else if (parsed.kind === undefined || parsed.kind === 'rollout')
        rollouts.set(parsed.rollout_id, {
          step: parsed.step,
          instance_id: parsed.instance_id,
          rubric_version: parsed.rubric_version,
          score: parsed.score,
        })
    }
  } while (after !== undefined)
  return { rollouts }
}

/** Foreign 5xx counted by route, status and first words, for the failure message and the log line. */
function summarise(errors: readonly ServerError[]): string {
  const counts = new Map<string, number>()
  for (const error of errors) {
    const key =
      `${error.status} ${error.path.replace(/^.*\/(compat\/\w+|score\/batch|score)$/, '$1')} ` +
      `(${error.contentType || 'no type'}, Retry-After ${error.retryAfter ?? 'none'}): ${error.body.slice(0, 60)}`
    counts.set(key, (counts.get(key) ?? 0) + 1)
  }
  return [...counts].map(([key, count]) => `${count}× ${key}`).join('; ') || 'none'
}
