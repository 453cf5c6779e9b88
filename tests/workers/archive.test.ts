/**
 * `GET /runs/:runId/archive` on real workerd with local R2: the run's archived rollouts as NDJSON in step order, the
 * judging settings first and each rubric version before the rollouts scored on it, bounded reads that go on with
 * `after`, and clear refusals (no archive, bad ranges, someone else's token).
 */
import { env } from 'cloudflare:workers'
import { describe, expect, it, vi } from 'vitest'
import { ArchiveLine } from '../../src/schemas/archive.ts'
import { ADMIN_TOKEN, METADATA, call, createRun, rollout } from './helpers.ts'

const RUBRICS = {
  anchor_rubrics: [{ id: 'a-correct', text: 'The final answer is correct.', weight: 2 }],
  adaptive_rubrics: [{ id: 'd-steps', text: 'Shows the key steps of the calculation.' }],
}

type Run = { runId: string; token: string }

/** Scores three rollouts in each of `steps` steps, closing each and waiting for its update; then for the archive. */
async function archivedRun(steps: number): Promise<Run> {
  const run = await createRun({ ...RUBRICS, archive: true, ledger_retention_steps: 1 })
  for (let step = 0; step < steps; step++) {
    for (let i = 0; i < 3; i++) {
      const scored = await call('POST', '/score', {
        token: run.token,
        body: {
          rollout: rollout(`r${step}-${i}`, { output: `The answer is ${i + 3}.` }),
          metadata: { ...METADATA, current_step: step },
        },
      })
      expect(scored.status).toBe(200)
    }
    expect((await call('POST', '/complete', { token: run.token })).json).toMatchObject({ closed: true, step })
    expect((await call('GET', '/rubric_status/wait?timeout_s=30', { token: run.token })).json).toMatchObject({
      status: 'updated',
      step,
    })
  }
  // Each ledger shard archives its own rows of a step: wait for every rollout, not for one object per step.
  await vi.waitFor(
    async () => {
      const listed = await env.ARCHIVE!.list({ prefix: `runs/${run.runId}/steps/` })
      const texts = await Promise.all(
        listed.objects.map(async (object) => (await env.ARCHIVE!.get(object.key))!.text()),
      )
      expect(
        texts
          .join('')
          .split('\n')
          .filter((line) => line.trim() !== '').length,
      ).toBe(3 * steps)
    },
    { timeout: 10_000, interval: 100 },
  )
  return run
}

const linesOf = (text: string) =>
  text
    .trim()
    .split('\n')
    .map((line) => ArchiveLine.parse(JSON.parse(line)))
const rolloutsOf = (lines: ArchiveLine[]) =>
  lines.filter((line) => !('kind' in line) || line.kind === undefined || line.kind === 'rollout') as Extract<
    ArchiveLine,
    { rollout_id: string }
  >[]

describe('GET /runs/:runId/archive', () => {
  it('streams the judging settings, each rubric version once before its rollouts, rollouts in step order', async () => {
    const run = await archivedRun(3)
    const answer = await call('GET', `/runs/${run.runId}/archive`, { token: run.token })
    expect(answer.status).toBe(200)
    expect(answer.headers.get('content-type')).toContain('application/x-ndjson')
    const lines = linesOf(answer.text)
    expect(lines[0]).toEqual({
      kind: 'run',
      run_id: run.runId,
      from_step: 0,
      to_step: null,
      grade_max: 10,
      locale: 'en',
      prompts: {},
    })
    const rollouts = rolloutsOf(lines)
    expect(rollouts.map((line) => line.rollout_id).sort()).toEqual([
      'r0-0',
      'r0-1',
      'r0-2',
      'r1-0',
      'r1-1',
      'r1-2',
      'r2-0',
      'r2-1',
      'r2-2',
    ])
    expect(rollouts.map((line) => line.step)).toEqual([...rollouts.map((line) => line.step)].sort())
    const seen = new Set<string>()
    for (const line of lines) {
      if ('kind' in line && line.kind === 'rubrics') {
        const key = `${line.instance_id}/${line.rubric_version}`
        expect(seen.has(key), `rubrics ${key} sent twice`).toBe(false)
        seen.add(key)
        expect(line.rubrics.map((rubric) => rubric.id)).toContain('a-correct')
      } else if (!('kind' in line) || line.kind === undefined) {
        expect(
          seen.has(`${line.instance_id}/${line.rubric_version}`),
          `rollout ${line.rollout_id} before its rubrics`,
        ).toBe(true)
      }
    }
    // The admin token reads it too, and the caller's own run answers at /archive.
    expect(
      rolloutsOf(linesOf((await call('GET', `/runs/${run.runId}/archive`, { token: ADMIN_TOKEN })).text)),
    ).toHaveLength(9)
    expect(rolloutsOf(linesOf((await call('GET', '/archive', { token: run.token })).text))).toHaveLength(9)
  })

  it('reads a step range, and a bounded read ends with a `more` line that the next request goes on from', async () => {
    const run = await archivedRun(3)
    const ranged = rolloutsOf(
      linesOf((await call('GET', `/runs/${run.runId}/archive?from_step=1&to_step=1`, { token: run.token })).text),
    )
    expect(ranged.map((line) => line.rollout_id).sort()).toEqual(['r1-0', 'r1-1', 'r1-2'])

    const collected: string[] = []
    let after: string | undefined
    let requests = 0
    do {
      const page = linesOf(
        (
          await call('GET', `/runs/${run.runId}/archive?limit=2${after ? `&after=${encodeURIComponent(after)}` : ''}`, {
            token: run.token,
          })
        ).text,
      )
      requests++
      collected.push(...rolloutsOf(page).map((line) => line.rollout_id))
      const last = page.at(-1)!
      after = 'kind' in last && last.kind === 'more' ? last.after : undefined
      if (after) expect(rolloutsOf(page).length).toBeGreaterThan(0)
    } while (after && requests < 20)
    expect(collected.sort()).toEqual(
      rolloutsOf(linesOf((await call('GET', `/runs/${run.runId}/archive`, { token: run.token })).text))
        .map((line) => line.rollout_id)
        .sort(),
    )
    expect(requests).toBeGreaterThan(1)
  })

  it("refuses a run without archive (409 archive_disabled), bad ranges (400) and another run's token", async () => {
    const plain = await createRun(RUBRICS)
    const refused = await call('GET', `/runs/${plain.runId}/archive`, { token: plain.token })
    expect(refused.status).toBe(409)
    expect(refused.json.error.code).toBe('archive_disabled')
    expect(refused.json.error.message).toContain('"archive": true')

    const archived = await createRun({ ...RUBRICS, archive: true })
    expect(
      (await call('GET', `/runs/${archived.runId}/archive`, { token: archived.token })).text.trim().split('\n'),
    ).toHaveLength(1)
    for (const query of [
      'from_step=-1',
      'from_step=3&to_step=2',
      'limit=0',
      'limit=301',
      'after=runs/other/steps/000001/global.0.ndjson',
    ]) {
      const bad = await call('GET', `/runs/${archived.runId}/archive?${query}`, { token: archived.token })
      expect(bad.status, query).toBe(400)
      expect(bad.json.error.code, query).toBe('invalid_request')
    }
    const foreign = await call('GET', `/runs/${archived.runId}/archive`, { token: plain.token })
    expect([401, 403]).toContain(foreign.status)
  })
})
