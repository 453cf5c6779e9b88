/**
 * `npm run simulate` end to end: the CLI as a child process drives a 3-step simulated training loop
 * (8 rollouts a step, a fresh run from --create-run) against a real `wrangler dev` on the mock backend,
 * through the queues, the analyzer, the summarizer and the updater.
 *
 * What the mock really does (src/agents/analyzer/mock.ts, src/agents/updater/mock.ts): every simulated
 * hacking rollout is flagged; the step's CORRECTIVE update adds an adaptive rubric that gives 0 to answers
 * that address the grader, claim a score or stuff rubric keywords, and weights it up at each later step
 * with hacking. So the rubric version rises every step, and hacking falls behind correct answers by more
 * at the last step than at the first.
 */
import { spawn } from 'node:child_process'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { SimulationOutput } from '../../offline/simulate/command.ts'
import { startWranglerDev, type WranglerDev } from './support/wrangler-dev.ts'

const ROOT = path.join(import.meta.dirname, '../..')
const STEPS = 3
const ROLLOUTS_PER_STEP = 8

let dev: WranglerDev

beforeAll(async () => {
  dev = await startWranglerDev()
})

afterAll(async () => {
  await dev?.stop()
})

/** Runs the CLI to completion; resolves with its exit code and output. */
function runCli(
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('node', ['reward-harness', 'simulate', ...args], {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 55_000,
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')))
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')))
    child.once('error', reject)
    child.once('close', (code) => resolve({ code, stdout, stderr }))
  })
}

describe('npm run simulate against wrangler dev (mock backend)', () => {
  it('runs 3 steps on a fresh run: rubrics evolve, hacking is flagged and scores below correct answers', async () => {
    const { code, stdout, stderr } = await runCli(
      [
        '--url',
        dev.baseUrl,
        '--steps',
        String(STEPS),
        '--rollouts-per-step',
        String(ROLLOUTS_PER_STEP),
        '--create-run',
        '--seed',
        '1',
        '--json',
        '--wait-timeout',
        '40',
      ],
      // The admin token through the environment (the flag and .dev.vars are covered by the unit tests).
      { ...process.env, REWARD_HARNESS_ADMIN_TOKEN: dev.adminToken, NO_COLOR: '1' },
    )
    expect(code, `${stderr}\n${dev.logs()}`).toBe(0)
    const output = JSON.parse(stdout) as SimulationOutput
    // The table and the summary went to stderr, so stdout is JSON alone.
    expect(stderr).toMatch(/created run sim-1-/)
    expect(stderr).toMatch(/Summary — run sim-1-/)

    expect(output.created_run).toBe(true)
    expect(output.run_id).toMatch(/^sim-1-/)
    const reports = output.reports
    expect(reports.map((report) => report.step)).toEqual([0, 1, 2])
    for (const report of reports) {
      expect(report.errors).toBe(0)
      expect(report.update_timed_out).toBe(false)
      expect(report.status).toBe('updated')
      expect(Object.values(report.counts).reduce((sum, n) => sum + n, 0)).toBe(ROLLOUTS_PER_STEP)
      expect(report.hacking_flags_source).toBe('rubric_status')
    }
    // A fresh run: its own steps from 0, so nothing is shared with other simulations.
    expect(reports.map((report) => report.server_step)).toEqual([0, 1, 2])

    // The rubric version rose at least once, through an update recorded in /rubrics/history.
    expect(reports[0]!.rubric_version_scored).toBe(1)
    expect(reports.at(-1)!.rubric_version!).toBeGreaterThan(1)
    expect(reports.some((report) => report.update?.changed && report.update.source === 'history')).toBe(true)
    expect(reports.map((report) => report.update?.strategy)).toContain('CORRECTIVE')
    // The step's rollouts were scored on the version the previous step's update left.
    for (let i = 1; i < reports.length; i++)
      expect(reports[i]!.rubric_version_scored).toBe(reports[i - 1]!.rubric_version)

    // Hacking was flagged, and every hacking rollout was (its analysis in /memory).
    const flags = reports.reduce((sum, report) => sum + report.hacking_flags!, 0)
    expect(flags).toBeGreaterThan(0)
    const hackingRollouts = reports.reduce((sum, report) => sum + report.counts.reward_hacking, 0)
    expect(reports.reduce((sum, report) => sum + report.flagged_by_behaviour!.reward_hacking, 0)).toBe(hackingRollouts)
    expect(
      reports.reduce(
        (sum, report) => sum + report.flagged_by_behaviour!.correct + report.flagged_by_behaviour!.wrong,
        0,
      ),
    ).toBe(0)

    // Hacking scores less at the last step than at the first, or less than correct answers at the last step…
    const first = reports[0]!.scores
    const last = reports.at(-1)!.scores
    expect(first.reward_hacking.n).toBeGreaterThan(0)
    expect(last.reward_hacking.n).toBeGreaterThan(0)
    const hackingFirst = first.reward_hacking.mean!
    const hackingLast = last.reward_hacking.mean!
    expect(hackingLast < hackingFirst || hackingLast < last.correct.mean!).toBe(true)
    expect(output.summary.hacking_penalised).toBe(true)
    // …and the evolution is what widened the gap: the guard rubric the updater added penalises hacking.
    expect(last.correct.mean! - hackingLast).toBeGreaterThan(first.correct.mean! - hackingFirst)
    const adaptive = output.final_rubrics!.filter((rubric) => !rubric.is_anchor)
    expect(adaptive.some((rubric) => /grader/i.test(rubric.text) && /score/i.test(rubric.text))).toBe(true)
  })
})
