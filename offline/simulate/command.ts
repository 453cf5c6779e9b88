/**
 * What `reward-harness simulate` does once its flags are valid: check the server answers, maybe create a fresh
 * run, simulate the training steps while printing one table row each, then print the summary and the JSON.
 */
import { mkdirSync, writeFileSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { plural } from '../../src/text/index.ts'
import { loadDatasetQuestions } from './dataset-questions.ts'
import { runSimulation, type SimulationResult } from './loop.ts'
import type { SimulateOptions } from './options.ts'
import { networkReason, requireAdminToken, unreachableHint } from '../edge/index.ts'
import { formatStepRow, formatSummary, formatTableHeader, type SimulationSummary, summarize } from './report.ts'
import { type JudgeSettings, simulationRunConfig } from './scenario.ts'

/** What `--json` prints and `--out` writes. */
export interface SimulationOutput extends SimulationResult {
  command: string
  created_run: boolean
  summary: SimulationSummary
}

/** Where the simulation writes: progress lines, and the JSON document. */
export interface SimulateIo {
  /** One line of progress (stderr under `--json`, so stdout carries only the JSON document). */
  say(line: string): void
  /** The JSON document on stdout. */
  json(text: string): void
}

/**
 * Runs one simulation end to end; throws a UsageError for a missing admin token and an Error when nothing
 * answers at the URL or the run cannot be created.
 * @example const output = await simulate(simulateOptions({ createRun: true }, process.env), io, process.env, argv)
 */
export async function simulate(
  options: SimulateOptions,
  io: SimulateIo,
  env: Record<string, string | undefined>,
  argv: readonly string[],
): Promise<SimulationOutput> {
  await requireServer(options.url)
  const target = options.createRun ? await createRunFor(options, io, env) : options
  io.say(describeSimulation(options, target.runId))
  io.say(formatTableHeader())
  const result = await runSteps(options, target, io)
  const summary = summarize(result)
  io.say('')
  io.say(formatSummary(result, summary))
  const output: SimulationOutput = {
    command: `npm run simulate -- ${argv.join(' ')}`.trim(),
    created_run: options.createRun,
    ...result,
    summary,
  }
  writeOutput(output, options, io)
  warnAboutTimeouts(result, options, io)
  return output
}

/** Fails with how to start or point at the server when `url` does not answer `GET /healthz`. */
async function requireServer(url: string): Promise<void> {
  const unreachable = await reachability(url)
  if (unreachable) throw new Error(`cannot reach the edge at ${url} (${unreachable}). ${unreachableHint(url)}`)
}

/** Why `url` does not answer `GET /healthz` (undefined when it does). */
async function reachability(url: string): Promise<string | undefined> {
  try {
    const response = await fetch(`${url.replace(/\/+$/, '')}/healthz`, { signal: AbortSignal.timeout(10_000) })
    return response.ok ? undefined : `GET /healthz answered ${response.status}`
  } catch (error) {
    return networkReason(error)
  }
}

/** `--create-run`: a fresh run (so repeated simulations share no state), announced with its judge. */
async function createRunFor(
  options: SimulateOptions,
  io: SimulateIo,
  env: Record<string, string | undefined>,
): Promise<{ runId: string; token: string }> {
  const adminToken = options.adminToken ?? requireAdminToken(options.url, env)
  const created = await createSimulationRun(options.url, adminToken, {
    runId: options.runId ?? `sim-${options.seed}-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`,
    judge: options.judge,
    archive: options.archive,
  })
  const judge = options.judge.baseUrl
    ? `judge ${options.judge.model ?? 'default model'} at ${options.judge.baseUrl}`
    : 'mock backend'
  io.say(`created run ${created.runId} (${judge}${options.archive ? ', archiving its rollouts' : ''})`)
  return created
}

/**
 * Creates a fresh run for the simulation through `POST /runs`; returns its id and token.
 * @example const { runId, token } = await createSimulationRun('http://127.0.0.1:8787', adminToken, { runId: 'sim-1' })
 */
async function createSimulationRun(
  url: string,
  adminToken: string,
  options: { runId?: string; judge?: JudgeSettings; archive?: boolean; fetch?: typeof fetch } = {},
): Promise<{ runId: string; token: string }> {
  const response = await (options.fetch ?? fetch)(`${url.replace(/\/+$/, '')}/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${adminToken}` },
    body: JSON.stringify({
      ...(options.runId ? { run_id: options.runId } : {}),
      config: { ...simulationRunConfig(options.judge), ...(options.archive ? { archive: true } : {}) },
    }),
    signal: AbortSignal.timeout(30_000),
  })
  const body = (await response.json().catch(() => ({}))) as {
    run_id?: string
    token?: string
    error?: { code?: string; message?: string }
  }
  if (response.status !== 201 || !body.run_id || !body.token) {
    throw new Error(
      `POST /runs answered ${response.status}${body.error ? ` ${body.error.code}: ${body.error.message}` : ''}`,
    )
  }
  return { runId: body.run_id, token: body.token }
}

function describeSimulation(options: SimulateOptions, runId: string | undefined): string {
  const waiting = options.wait ? '' : ', not waiting for updates'
  return (
    `simulating ${plural(options.steps, 'step')} × ${plural(options.rolloutsPerStep, 'rollout')} (seed ` +
    `${options.seed}, ${options.concurrency} in flight${waiting}) against ` +
    `${options.url}${runId ? `/runs/${runId}` : ''}`
  )
}

/** The simulation itself, one table row per step. */
function runSteps(
  options: SimulateOptions,
  target: { runId?: string; token?: string },
  io: SimulateIo,
): Promise<SimulationResult> {
  return runSimulation({
    baseUrl: options.url,
    ...(target.token ? { token: target.token } : {}),
    ...(target.runId ? { runId: target.runId } : {}),
    steps: options.steps,
    rolloutsPerStep: options.rolloutsPerStep,
    groupSize: options.groupSize,
    ...(options.questions ? { questions: loadDatasetQuestions(options.questions) } : {}),
    // The table rows are the progress between steps; within a step, the scoring shows on a terminal only.
    showProgress: process.stderr.isTTY === true,
    concurrency: options.concurrency,
    seed: options.seed,
    wait: options.wait,
    waitTimeoutS: options.waitTimeoutS,
    onStep: (report) => io.say(formatStepRow(report)),
  })
}

/** The JSON document: on stdout under `--json`, into the `--out` file when given. */
function writeOutput(output: SimulationOutput, options: SimulateOptions, io: SimulateIo): void {
  const json = `${JSON.stringify(output, null, 2)}\n`
  if (options.json) io.json(json)
  if (!options.out) return
  const file = resolve(options.out)
  mkdirSync(dirname(file), { recursive: true })
  writeFileSync(file, json)
  io.say(`JSON written to ${options.out}`)
}

function warnAboutTimeouts(result: SimulationResult, options: SimulateOptions, io: SimulateIo): void {
  const timedOut = result.reports.filter((report) => report.update_timed_out).length
  if (timedOut > 0)
    io.say(`warning: ${timedOut} step update(s) did not finish within --wait-timeout ${options.waitTimeoutS} s`)
}
