/**
 * `npm run simulate -- --url http://127.0.0.1:8787 --steps 5 [...]`: a simulated RL training loop
 * against a running Reward Harness, AMARIS-style. `--help` lists every flag.
 */
import { plural } from '../../src/text/index.ts'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { runSimulation, type SimulationResult } from './loop.ts'
import { formatStepRow, formatSummary, formatTableHeader, summarize, type SimulationSummary } from './report.ts'
import { simulationRunConfig, type JudgeSettings } from './scenario.ts'

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url))

export const HELP = `Simulated RL training loop against a running Reward Harness (AMARIS-style).

Usage: npm run simulate -- [options]
       npx tsx offline/simulate/cli.ts [options]

Each step scores K arithmetic word-problem rollouts concurrently (correct, wrong, verbose, sycophantic
and reward-hacking answers, in a mix that shifts over the training stages), calls POST /complete,
waits for the step's rubric update (GET /rubric_status/wait), then reads /rubric_status, /rubrics,
/rubrics/history and /memory and prints one table row. A summary closes the run.

Server and run:
  --url URL               server base URL (default http://127.0.0.1:$PORT, 8787 without PORT, as npm start)
  --token T               run token (or REWARD_HARNESS_TOKEN); omit for the local default run
  --run-id R              address run R as /runs/R; with --create-run, the id to create
  --create-run            create a fresh run through POST /runs (admin), so repeated simulations do
                          not share state; its token is used for the rest of the simulation
  --admin-token T         admin token for --create-run (else REWARD_HARNESS_ADMIN_TOKEN, else
                          ADMIN_TOKEN from .dev.vars in the current directory or the repository)
  --judge-base-url URL    with --create-run: an OpenAI-compatible endpoint for every agent
                          (sets agents.default.base_url; the default is the mock backend)
  --judge-model M         with --create-run: the model name at that endpoint
  --judge-api-key-env N   with --create-run: name of the Worker secret holding the endpoint's key
  --archive               with --create-run: the run archives every scored rollout to R2 (what
                          \`reward-harness distill --url … --run-id …\` reads)

Simulation:
  --steps N               training steps (default 5)
  --rollouts-per-step K   rollouts scored per step (default 16)
  --group-size G          rollouts per question, as GRPO samples a group per prompt (default 1)
  --concurrency C         most /score requests in flight (default 8)
  --seed S                seed of questions, behaviours and answers (default 1)
  --no-wait               do not wait for each step's update before the next step (the AMARIS async
                          trainer); per-step flags and strategies are read after the last update
  --wait-timeout S        longest wait for one step's update, seconds (default 300)

Output:
  --json                  print the results as JSON on stdout (progress goes to stderr)
  --out FILE              also write the JSON results to FILE
  -h, --help              show this help

Table columns: mean score per behaviour (with its count), the step's mean, the rubric version the
step was scored on → the version after its update, flags = rollouts the analyzer flagged as reward
hacking (hacking_flags of /rubric_status; the mock analyzer also flags sycophancy and padded answers
that score well), and the update's strategy (from /rubrics/history, else /rubric_status).

Examples:
  npm start   # in another terminal: serves http://127.0.0.1:8787 on the mock backend
  npm run simulate -- --steps 5 --create-run
  npm run simulate -- --url http://127.0.0.1:8787 --steps 10 --rollouts-per-step 32 --seed 7 --json > sim.json
  npm run simulate -- --create-run --judge-base-url http://127.0.0.1:8000/v1 --judge-model Qwen/Qwen3-8B
`

/** Parsed and validated command line. */
export interface CliOptions {
  url: string
  token?: string
  runId?: string
  createRun: boolean
  /** The created run archives its scored rollouts. */
  archive: boolean
  adminToken?: string
  judge: JudgeSettings
  steps: number
  rolloutsPerStep: number
  groupSize: number
  concurrency: number
  seed: number
  wait: boolean
  waitTimeoutS: number
  json: boolean
  out?: string
  help: boolean
}

/** A command-line mistake: printed with a pointer to --help, exit code 2. */
export class UsageError extends Error {}

/**
 * Parses and validates the command line (flags only; environment fallbacks come from `env`).
 * @example parseCliArgs(['--steps', '3', '--create-run']).steps // 3
 */
export function parseCliArgs(argv: string[], env: Record<string, string | undefined> = process.env): CliOptions {
  let values: Record<string, string | boolean | undefined>
  try {
    ;({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        url: { type: 'string' },
        token: { type: 'string' },
        'run-id': { type: 'string' },
        'create-run': { type: 'boolean' },
        archive: { type: 'boolean' },
        'admin-token': { type: 'string' },
        'judge-base-url': { type: 'string' },
        'judge-model': { type: 'string' },
        'judge-api-key-env': { type: 'string' },
        steps: { type: 'string' },
        'rollouts-per-step': { type: 'string' },
        'group-size': { type: 'string' },
        concurrency: { type: 'string' },
        seed: { type: 'string' },
        'no-wait': { type: 'boolean' },
        'wait-timeout': { type: 'string' },
        json: { type: 'boolean' },
        out: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }))
  } catch (error) {
    throw new UsageError((error as Error).message)
  }
  const integer = (flag: string, fallback: number, min: number, max: number) => {
    const raw = values[flag]
    if (raw === undefined) return fallback
    const value = Number(raw)
    if (!Number.isInteger(value) || value < min || value > max)
      throw new UsageError(`--${flag} must be an integer from ${min} to ${max} (got "${raw}")`)
    return value
  }
  const text = (flag: string) => (typeof values[flag] === 'string' ? (values[flag] as string) : undefined)
  const url = text('url') ?? `http://127.0.0.1:${env.PORT ?? '8787'}`
  if (!/^https?:\/\/[^/]/.test(url)) throw new UsageError(`--url must be an http(s) URL (got "${url}")`)
  const runId = text('run-id')
  if (runId !== undefined && !/^[a-z0-9][a-z0-9_-]{0,63}$/.test(runId))
    throw new UsageError('--run-id may hold lower-case letters, digits, _ and - (at most 64)')
  const createRun = values['create-run'] === true
  const judge: JudgeSettings = {
    ...(text('judge-base-url') ? { baseUrl: text('judge-base-url')! } : {}),
    ...(text('judge-model') ? { model: text('judge-model')! } : {}),
    ...(text('judge-api-key-env') ? { apiKeyEnv: text('judge-api-key-env')! } : {}),
  }
  if (!createRun && Object.keys(judge).length > 0)
    throw new UsageError('--judge-* flags configure the run created by --create-run; add --create-run')
  if (!createRun && values.archive === true)
    throw new UsageError('--archive configures the run created by --create-run; add --create-run')
  if (judge.baseUrl && !/^https?:\/\/[^/]/.test(judge.baseUrl))
    throw new UsageError('--judge-base-url must be an http(s) URL')
  const token = text('token') ?? env.REWARD_HARNESS_TOKEN
  return {
    url,
    ...(token ? { token } : {}),
    ...(runId ? { runId } : {}),
    createRun,
    archive: values.archive === true,
    ...(text('admin-token') ? { adminToken: text('admin-token')! } : {}),
    judge,
    steps: integer('steps', 5, 1, 10_000),
    rolloutsPerStep: integer('rollouts-per-step', 16, 1, 10_000),
    groupSize: integer('group-size', 1, 1, 1_024),
    concurrency: integer('concurrency', 8, 1, 256),
    seed: integer('seed', 1, 0, 2 ** 31 - 1),
    wait: values['no-wait'] !== true,
    waitTimeoutS: integer('wait-timeout', 300, 1, 3_600),
    json: values.json === true,
    ...(text('out') ? { out: text('out')! } : {}),
    help: values.help === true,
  }
}

/**
 * The admin token for `--create-run`: the flag, else REWARD_HARNESS_ADMIN_TOKEN, else ADMIN_TOKEN from
 * `.dev.vars` in the current directory or the repository root (what `npm start` writes).
 * @example resolveAdminToken(undefined, process.env) // 'a1b2…' from .dev.vars
 */
export function resolveAdminToken(
  flag: string | undefined,
  env: Record<string, string | undefined>,
  searchDirs: readonly string[] = [process.cwd(), REPO_ROOT],
): string | undefined {
  if (flag) return flag
  if (env.REWARD_HARNESS_ADMIN_TOKEN) return env.REWARD_HARNESS_ADMIN_TOKEN
  for (const dir of searchDirs) {
    const file = join(dir, '.dev.vars')
    if (!existsSync(file)) continue
    const token = readFileSync(file, 'utf8').match(/^\s*ADMIN_TOKEN\s*=\s*"?([^"\n]+?)"?\s*$/m)?.[1]
    if (token) return token
  }
  return undefined
}

/**
 * Creates a fresh run for the simulation through `POST /runs`; returns its id and token.
 * @example const { runId, token } = await createSimulationRun('http://127.0.0.1:8787', adminToken, { runId: 'sim-1' })
 */
export async function createSimulationRun(
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

/** Why `url` does not answer `GET /healthz` (undefined when it does). */
async function reachability(url: string): Promise<string | undefined> {
  try {
    const response = await fetch(`${url.replace(/\/+$/, '')}/healthz`, { signal: AbortSignal.timeout(10_000) })
    return response.ok ? undefined : `GET /healthz answered ${response.status}`
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause
    return cause?.code ?? cause?.message ?? (error as Error).message
  }
}

/** What `--json` prints and `--out` writes. */
export interface SimulationOutput extends SimulationResult {
  command: string
  created_run: boolean
  summary: SimulationSummary
}

/**
 * Runs the CLI: parse, maybe create a run, simulate, print. Returns the process exit code.
 * @example process.exitCode = await main(['--steps', '3', '--create-run'])
 */
export async function main(argv: string[], env: Record<string, string | undefined> = process.env): Promise<number> {
  let options: CliOptions
  try {
    options = parseCliArgs(argv, env)
  } catch (error) {
    if (!(error instanceof UsageError)) throw error
    console.error(`simulate: ${error.message}\nRun with --help for the flags.`)
    return 2
  }
  if (options.help) {
    console.log(HELP)
    return 0
  }
  // With --json, stdout carries only the JSON document.
  const say = options.json ? (line: string) => console.error(line) : (line: string) => console.log(line)
  const unreachable = await reachability(options.url)
  if (unreachable) {
    console.error(
      `simulate: nothing answers at ${options.url} (${unreachable}). Start the server with \`npm start\` (it serves on PORT, 8787 by default) or pass --url http://127.0.0.1:<port>.`,
    )
    return 1
  }

  let { token, runId } = options
  if (options.createRun) {
    const adminToken = resolveAdminToken(options.adminToken, env)
    if (!adminToken) {
      console.error(
        'simulate: --create-run needs the admin token: --admin-token, REWARD_HARNESS_ADMIN_TOKEN, or ADMIN_TOKEN in .dev.vars (written by npm start)',
      )
      return 2
    }
    const created = await createSimulationRun(options.url, adminToken, {
      runId: options.runId ?? `sim-${options.seed}-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`,
      judge: options.judge,
      archive: options.archive,
    })
    ;({ runId, token } = created)
    say(
      `created run ${runId} (${options.judge.baseUrl ? `judge ${options.judge.model ?? 'default model'} at ${options.judge.baseUrl}` : 'mock backend'}${options.archive ? ', archiving its rollouts' : ''})`,
    )
  }

  say(
    `simulating ${plural(options.steps, 'step')} × ${plural(options.rolloutsPerStep, 'rollout')} (seed ${options.seed}, ${options.concurrency} in flight${options.wait ? '' : ', not waiting for updates'}) against ${options.url}${runId ? `/runs/${runId}` : ''}`,
  )
  say(formatTableHeader())
  const result = await runSimulation({
    baseUrl: options.url,
    ...(token ? { token } : {}),
    ...(runId ? { runId } : {}),
    steps: options.steps,
    rolloutsPerStep: options.rolloutsPerStep,
    groupSize: options.groupSize,
    // The table rows are the progress between steps; within a step, the scoring shows on a terminal only.
    showProgress: process.stderr.isTTY === true,
    concurrency: options.concurrency,
    seed: options.seed,
    wait: options.wait,
    waitTimeoutS: options.waitTimeoutS,
    onStep: (report) => say(formatStepRow(report)),
  })
  const summary = summarize(result)
  say('')
  say(formatSummary(result, summary))

  const output: SimulationOutput = {
    command: `npm run simulate -- ${argv.join(' ')}`.trim(),
    created_run: options.createRun,
    ...result,
    summary,
  }
  const json = `${JSON.stringify(output, null, 2)}\n`
  if (options.json) process.stdout.write(json)
  if (options.out) {
    const file = resolve(options.out)
    mkdirSync(dirname(file), { recursive: true })
    writeFileSync(file, json)
    say(`JSON written to ${options.out}`)
  }
  const timedOut = result.reports.filter((report) => report.update_timed_out).length
  if (timedOut > 0)
    say(`warning: ${timedOut} step update(s) did not finish within --wait-timeout ${options.waitTimeoutS} s`)
  return 0
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (code) => (process.exitCode = code),
    (error: unknown) => {
      console.error(`simulate: ${error instanceof Error ? error.message : String(error)}`)
      process.exitCode = 1
    },
  )
}
