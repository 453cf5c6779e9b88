/**
 * What trainers receive from a real `wrangler dev` is exactly consistent: OpenRLHF's request shape alone (no
 * `/complete`, no status reads, the default idle gap) closes a step per burst, each scored on one rubric version; and
 * four trainers at once, whose step updates commit while their next steps collect, get one version per group and per
 * step, the archive and `/rubric_status` saying what each trainer received.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { groupBy } from '../../src/collections/index.ts'
import { addRubricOnEveryUpdate, startLlmStub, type LlmStub } from '../support/llm-stub.ts'
import { callJson, callJsonRetrying, METADATA } from './support/http.ts'
import { openRlhfLegacy } from './support/trainers.ts'
import { startWranglerDev, type WranglerDev } from './support/wrangler-dev.ts'

const RUBRICS = {
  anchor_rubrics: [{ id: 'a-correct', text: 'The final answer is correct.', weight: 2 }],
  adaptive_rubrics: [{ id: 'd-steps', text: 'Shows the key steps.' }],
}
/** The run's default `close_after_idle_s`: the gap OpenRLHF's bursts are spaced around. */
const DEFAULT_IDLE_S = 30
const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

let dev: WranglerDev
let stub: LlmStub

beforeAll(async () => {
  stub = await startLlmStub()
  // Every update adds a rubric (so each makes a new version), and takes a while: the next step collects meanwhile.
  addRubricOnEveryUpdate(stub, 1_500)
  dev = await startWranglerDev()
})

afterAll(async () => {
  await dev?.stop()
  await stub?.close()
})

/** A run whose updater is the stub (every other agent the embedded mock). */
async function createRun(config: Record<string, unknown> = {}) {
  const role = { backend: 'openai', base_url: stub.baseUrl, model: 'stub-model', max_attempts: 3, timeout_ms: 20_000 }
  const created = await callJson(`${dev.baseUrl}/runs`, {
    token: dev.adminToken,
    body: { config: { ...RUBRICS, ...config, agents: { updater: role } } },
  })
  expect(created.status, JSON.stringify(created.body)).toBe(201)
  return { runId: created.body.run_id as string, token: created.body.token as string }
}

describe("OpenRLHF's requests alone", () => {
  it('three bursts 45 s apart, nobody reading the status: three closed steps, one rubric version each', async () => {
    const run = await createRun()
    const url = `${dev.baseUrl}/t/${run.token}/compat/openrlhf`
    const versions: number[][] = []
    for (let burst = 0; burst < 3; burst++) {
      if (burst > 0) await delay((DEFAULT_IDLE_S + 15) * 1_000)
      const query = Array.from({ length: 16 }, (_, i) => `Q: what is ${i} + ${i}? A: ${2 * i} (burst ${burst})`)
      const { rewards, extraLogs } = await openRlhfLegacy(
        [url, url],
        query,
        query.map((q) => `${q.split(' A: ')[0]!} A:`),
        query.map((_, i) => String(2 * i)),
      )
      expect(rewards).toHaveLength(16)
      versions.push(extraLogs!.rubric_version as number[])
    }
    for (const burst of versions) expect(new Set(burst).size).toBe(1)
    // Each burst after the first was scored on the rubrics its predecessor's update left.
    expect(versions.map((burst) => burst[0])).toEqual([1, 2, 3])
    // The trainer is done; the status shows the third burst as a step of its own.
    // The shards report their counts within a second.
    await vi.waitFor(
      async () =>
        expect((await callJson(`${dev.baseUrl}/rubric_status`, { token: run.token })).body).toMatchObject({
          step: 2,
          rollouts: 16,
        }),
      { timeout: 10_000, interval: 250 },
    )
  }, 240_000)
})

describe('four trainers at once', () => {
  it('3 steps of 64 rollouts in groups of 8: one version per group and step; the archive = what they got', async () => {
    const trainers = await Promise.all(Array.from({ length: 4 }, () => createRun({ archive: true })))
    const received = await Promise.all(trainers.map((run, t) => trainLoop(run, t)))
    for (const [t, run] of trainers.entries()) {
      const answers = received[t]!
      for (const step of [0, 1, 2]) {
        const ofStep = answers.filter((answer) => answer.trainerStep === step)
        expect(ofStep).toHaveLength(64)
        expect(new Set(ofStep.map((answer) => answer.step))).toEqual(new Set([step]))
        expect(new Set(ofStep.map((answer) => answer.rubric_version)).size).toBe(1)
      }
      for (const group of groupBy(answers, (answer) => answer.group).values())
        expect(new Set(group.map((answer) => answer.rubric_version)).size).toBe(1)
      // The trainer's last step ends with its /complete; it waits for that update as a sync loop would.
      expect((await callJson(`${dev.baseUrl}/complete`, { token: run.token, body: {} })).body).toMatchObject({
        closed: true,
        step: 2,
      })
      // A wait answers for the oldest step still updating: step 1's may come first.
      await vi.waitFor(
        async () => {
          const waited = await callJson(`${dev.baseUrl}/rubric_status/wait?timeout_s=30`, {
            token: run.token,
            timeoutMs: 40_000,
          })
          expect(waited.body).toMatchObject({ step: 2, status: 'updated', rollouts: 64 })
        },
        { timeout: 90_000, interval: 0 },
      )
      // The shards archive a step once its update has told them: soon after the wait ends.
      const archived = await vi.waitFor(
        async () => {
          const read = await readArchive(run.token)
          expect(read.size).toBe(answers.length)
          return read
        },
        { timeout: 20_000, interval: 250 },
      )
      for (const answer of answers)
        expect(archived.get(answer.rollout_id), answer.rollout_id).toEqual({
          step: answer.step,
          score: answer.score,
          rubric_version: answer.rubric_version,
        })
    }
  }, 240_000)
})

type Received = {
  rollout_id: string
  step: number
  score: number
  rubric_version: number
  trainerStep: number
  group: string
}

/**
 * A GRPO trainer: each step, 8 prompts × 8 samples sent to `/score` at once with the step in their metadata; the next
 * step starts as soon as the last answer is in (the update of the one before runs meanwhile).
 */
async function trainLoop(run: { token: string }, trainer: number): Promise<Received[]> {
  const received: Received[] = []
  for (let step = 0; step < 3; step++) {
    const sends = Array.from({ length: 64 }, async (_, i) => {
      const group = `t${trainer}-s${step}-p${i % 8}`
      const rollout = {
        id: `${group}-k${Math.floor(i / 8)}`,
        input: `Prompt ${group}: what is ${i % 8} + ${i % 8}?`,
        output: `${(i % 8) * 2}, sample ${Math.floor(i / 8)}`,
        supplemental_context: String((i % 8) * 2),
      }
      const answer = await callJsonRetrying(`${dev.baseUrl}/score`, {
        token: run.token,
        body: { rollout, metadata: { ...METADATA, current_step: step } },
      })
      expect(answer.status, JSON.stringify(answer.body)).toBe(200)
      const { rollout_id, step: ledgerStep, score, rubric_version } = answer.body
      received.push({ rollout_id, step: ledgerStep, score, rubric_version, trainerStep: step, group })
    })
    await Promise.all(sends)
  }
  return received
}

/** Every archived rollout of the run: its step, score and version, by rollout id. */
async function readArchive(token: string) {
  const response = await fetch(`${dev.baseUrl}/archive`, { headers: { authorization: `Bearer ${token}` } })
  expect(response.status).toBe(200)
  const lines = (await response.text())
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line))
  const rollouts = lines.filter((line) => line.kind === undefined || line.kind === 'rollout')
  return new Map(
    rollouts.map((line) => [
      line.rollout_id as string,
      { step: line.step as number, score: line.score as number, rubric_version: line.rubric_version as number },
    ]),
  )
}
