/**
 * From a simulated GRPO run to classifier-RM data, end to end against a real `wrangler dev` (local R2, D1, Durable
 * Objects, queues): `npm run simulate -- --create-run --archive --group-size 4` scores 3 steps; the closed steps land
 * in the archive; `reward-harness distill --url … --repeats 3` reads it through `GET /runs/<id>/archive` and writes
 * TRL data in which every pair clears the noise bound, a held-out file that shares no prompt with train, and a
 * summary whose counts add up; a second identical distill makes no LLM call; a run without an archive is exit 2.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { runChild, runRewardHarness } from '../support/child.ts'
import { callJson } from './support/http.ts'
import { startWranglerDev, type WranglerDev } from './support/wrangler-dev.ts'

const STEPS = 3
const ROLLOUTS_PER_STEP = 16

let dev: WranglerDev
let work: string

beforeAll(async () => {
  dev = await startWranglerDev()
  work = mkdtempSync(join(tmpdir(), 'distill-e2e-'))
})

afterAll(async () => {
  await dev?.stop()
  rmSync(work, { recursive: true, force: true })
})

const cli = (args: string[]) => runRewardHarness(args, { REWARD_HARNESS_ADMIN_TOKEN: dev.adminToken })
const readJsonl = (file: string) =>
  readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line))

/** The rollouts the edge's archive of `runId` answers now. */
async function archivedRollouts(runId: string): Promise<number> {
  const response = await fetch(`${dev.baseUrl}/runs/${runId}/archive`, {
    headers: { authorization: `Bearer ${dev.adminToken}` },
  })
  expect(response.status).toBe(200)
  return (await response.text())
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line))
    .filter((line) => line.kind === undefined).length
}

describe('simulated run → archive → distill', () => {
  it('distils a simulated run with archive: true into denoised TRL data; a second run makes 0 LLM calls', async () => {
    const simulated = await runChild(
      'node',
      [
        'reward-harness',
        'simulate',
        '--url',
        dev.baseUrl,
        '--steps',
        String(STEPS),
        '--rollouts-per-step',
        String(ROLLOUTS_PER_STEP),
        '--group-size',
        '4',
        '--create-run',
        '--archive',
        '--json',
        '--wait-timeout',
        '40',
      ],
      { REWARD_HARNESS_ADMIN_TOKEN: dev.adminToken },
    )
    expect(simulated.code, `${simulated.err}\n${dev.logs()}`).toBe(0)
    const runId = JSON.parse(simulated.out).run_id as string
    expect(simulated.err).toContain('archiving its rollouts')
    // Each step is archived once it has closed and its shards have learnt so (their next report).
    await vi.waitFor(async () => expect(await archivedRollouts(runId)).toBe(STEPS * ROLLOUTS_PER_STEP), {
      timeout: 60_000,
      interval: 500,
    })

    const out = join(work, 'data')
    const args = [
      'distill',
      '--url',
      dev.baseUrl,
      '--run-id',
      runId,
      '--repeats',
      '3',
      '--out',
      out,
      '--cache-dir',
      join(work, 'cache'),
      '--held-out',
      '0.25',
      '--json',
    ]
    const first = await cli(args)
    expect(first.code, first.err).toBe(0)
    const summary = JSON.parse(first.out)
    expect(summary.run_id).toBe(runId)
    expect(summary.rollouts.archived).toBe(STEPS * ROLLOUTS_PER_STEP)
    expect(summary.prompts.seen).toBe(STEPS * (ROLLOUTS_PER_STEP / 4))
    expect(summary.judgements.requested).toBe(summary.rollouts.distinct * 3)
    expect(summary.judgements).toMatchObject({ failed: 0, llm_calls: summary.judgements.requested })
    const dropped = Object.values(summary.pairs.dropped as Record<string, number>).reduce((a, b) => a + b, 0)
    expect(summary.pairs.candidates).toBe(summary.pairs.kept + dropped)
    expect(summary.pairs.kept).toBe(summary.pairs.train + summary.pairs.held_out)
    expect(summary.pairs.kept).toBeGreaterThan(0)

    const points = new Map(
      [...readJsonl(join(out, 'pointwise.train.jsonl')), ...readJsonl(join(out, 'pointwise.held_out.jsonl'))].map(
        (row) => [`${row.prompt}\u0000${row.response}`, row],
      ),
    )
    const train = readJsonl(join(out, 'trl.train.jsonl'))
    const heldOut = readJsonl(join(out, 'trl.held_out.jsonl'))
    expect(train.length + heldOut.length).toBe(summary.pairs.kept)
    for (const pair of [...train, ...heldOut]) {
      const chosen = points.get(`${pair.prompt}\u0000${pair.chosen}`)
      const rejected = points.get(`${pair.prompt}\u0000${pair.rejected}`)
      const bound = 1.96 * Math.sqrt(chosen.spread ** 2 / chosen.n + rejected.spread ** 2 / rejected.n)
      expect(chosen.score - rejected.score, `${pair.chosen} over ${pair.rejected}`).toBeGreaterThan(bound - 1e-6)
    }
    const trainPrompts = new Set(train.map((pair) => pair.prompt))
    expect(heldOut.length).toBeGreaterThan(0)
    for (const pair of heldOut) expect(trainPrompts.has(pair.prompt)).toBe(false)

    const second = await cli(args)
    expect(second.code, second.err).toBe(0)
    expect(JSON.parse(second.out).judgements).toMatchObject({ llm_calls: 0, cache_hits: summary.judgements.requested })
  })

  it('a run without an archive is exit 2 naming the cause', async () => {
    const created = await callJson(`${dev.baseUrl}/runs`, {
      method: 'POST',
      token: dev.adminToken,
      body: { run_id: 'no-archive', config: { anchor_rubrics: [{ text: 'Correct.' }] } },
    })
    expect(created.status).toBe(201)
    const refused = await cli(['distill', '--url', dev.baseUrl, '--run-id', 'no-archive', '--out', join(work, 'none')])
    expect(refused.code).toBe(2)
    expect(refused.err).toContain('archive_disabled')
    expect(refused.err).not.toContain(dev.adminToken)
  })
})
