/**
 * `npx tsx bench/llm-calls.ts [--steps n] [--rollouts-per-step k] [--repeat-fraction f]`: LLM calls per
 * `/score`, and per rollout all-in (the background analysis and the per-step update pipeline included),
 * set beside the reference systems' counts.
 *
 * In one run: serves the built Worker from Miniflare (mock backend: every agent call is counted like a real one,
 * in the run's per-step sums that `GET /llm_calls` answers), runs the simulated training loop (`offline/simulate`) for
 * `steps` steps of `rollouts-per-step` rollouts, then scores a `repeat-fraction` of the last step's rollouts again (a
 * trainer retrying a request) and reads the call log grouped by role.
 * References (../shared/reference/autosr.md §2.1, §4 and §8.5): autosr's RM server grades a score with
 * `num_votes` (default 3) verifier calls and no cache; AMARIS analyses every rollout (1 call) and updates
 * the rubrics once per step.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { RewardClient } from '../src/client/index.ts'
import { runSimulation } from '../offline/simulate/loop.ts'
import { buildBundles, onInterrupt, startBench } from './harness.ts'

/** autosr's default `num_votes`: verifier calls per /score (its RM server bypasses the grade cache). */
const AUTOSR_CALLS_PER_SCORE = 3

async function main() {
  const { values } = parseArgs({
    options: {
      steps: { type: 'string', default: '3' },
      'rollouts-per-step': { type: 'string', default: '16' },
      'repeat-fraction': { type: 'string', default: '0.25' },
    },
  })
  const steps = Number(values.steps)
  const perStep = Number(values['rollouts-per-step'])
  const repeatFraction = Number(values['repeat-fraction'])
  const outDir = mkdtempSync(join(tmpdir(), 'rh-calls-'))
  const forget = onInterrupt(() => rmSync(outDir, { recursive: true, force: true }))
  const server = await startBench(await buildBundles(outDir), { stub: 'worker', storage: 'memory' })
  try {
    const simulation = await runSimulation({
      baseUrl: server.url,
      steps,
      rolloutsPerStep: perStep,
      seed: 1,
      idPrefix: 'calls',
      observe: false,
    })
    const simulated = simulation.reports.reduce(
      (sum, step) => sum + Object.values(step.counts).reduce((a, b) => a + b, 0) - step.errors,
      0,
    )
    // A trainer that retries: rollouts scored, then the same ids again in the same step → answered from the ledger.
    const client = new RewardClient({ baseUrl: server.url })
    const metadata = { high_level_goal: 'math', model_size: '7B', current_step: steps, total_steps: steps + 1 }
    const extra = Array.from({ length: Math.round(perStep * repeatFraction) }, (_, i) => ({
      id: `retry-${i}`,
      input: `What is ${i} + ${i}?`,
      output: `${2 * i}`,
    }))
    for (const rollout of extra) await client.scoreAsync(rollout, metadata)
    for (const rollout of extra) await client.scoreAsync(rollout, metadata)
    const scored = simulated + extra.length
    const repeats = extra
    // The ledger shards hand the scorer's calls to the coordinator within a second; step updates report their own.
    await new Promise((resolve) => setTimeout(resolve, 3_000))
    const summed = (
      (await (await fetch(`${server.url}/llm_calls`)).json()) as { calls: { role: string; calls: number }[] }
    ).calls
    const byRole = [...new Set(summed.map((group) => group.role))].sort().map((role) => ({
      role,
      calls: summed.filter((group) => group.role === role).reduce((sum, group) => sum + group.calls, 0),
    }))
    const requests = scored + repeats.length
    const calls = (role: string) => byRole.find((row) => row.role === role)?.calls ?? 0
    const scorer = calls('scorer')
    const total = byRole.reduce((sum, row) => sum + row.calls, 0)
    console.log(
      `LLM calls, mock backend, ${steps} steps × ${perStep} rollouts + ${repeats.length} repeated requests ` +
        `(${requests} /score requests), ${new Date().toISOString()}\n`,
    )
    console.log('role               calls   per /score request')
    for (const row of byRole)
      console.log(`${row.role.padEnd(18)} ${String(row.calls).padStart(5)}   ${(row.calls / requests).toFixed(3)}`)
    console.log(`${'all roles'.padEnd(18)} ${String(total).padStart(5)}   ${(total / requests).toFixed(3)}`)
    console.log(
      `\nscorer calls per /score: ${(scorer / requests).toFixed(3)} (autosr RM server: ${AUTOSR_CALLS_PER_SCORE} per ` +
        `score, ratio ${(scorer / requests / AUTOSR_CALLS_PER_SCORE).toFixed(3)})`,
    )
    console.log(`all calls per distinct rollout (analysis + step updates included): ${(total / scored).toFixed(3)}`)
  } finally {
    await server.dispose()
    forget()
    rmSync(outDir, { recursive: true, force: true })
  }
}

await main()
