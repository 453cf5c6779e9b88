/**
 * `npx tsx bench/step-blocking.ts`: how long does the trainer block per step when the rubric-evolution
 * pipeline runs beside it (AMARIS async mode), against scoring alone?
 *
 * In one run: builds the Worker bundle (wrangler --dry-run, offline) and serves it twice from one
 * Miniflare (one workerd) on 127.0.0.1, each copy with its own Durable Objects and D1:
 *   - `app`:     wrangler.toml's queues with their consumers — the full pipeline (analysis per rollout,
 *                summary, memory queries, rubric update after each step);
 *   - `app-off`: the same code whose queues have no consumer — the pipeline is off, only scoring runs.
 * Every outbound fetch of both (every LLM call of every agent) lands in a Node stub that answers after a
 * FIXED latency (--latency-ms, 50 ms). The simulation loop of `npm run simulate` (offline/simulate/loop.ts)
 * then drives N steps of K rollouts (C in flight) in three modes, each on a fresh run:
 *   (a) scoring alone: `app-off`; the step's cost is its scoring phase (first /score sent → last answered);
 *   (b) async, does not wait (the target case): `app`; the trainer scores, calls /complete and starts the
 *       next step at once while the step's analyses and update run in the background;
 *   (c) async, waits for the update: `app`; the trainer also blocks on /rubric_status/wait each step.
 * The trainer-visible step time of (b) and (c) — scoring + /complete (+ the wait) — is compared with (a)'s
 * scoring phase. Modes are interleaved over --rounds (a, b, c, a, b, c, …); the first --warmup-steps of
 * every run are left out. The figure held to the target is the paired ratio: per round, (b)'s mean step
 * time ÷ (a)'s mean in the same round, then the median over rounds. Target: ≤ 1.05 (AMARIS reports
 * ≈ 5% time overhead in async mode). The table also shows the pooled mean and median ratios.
 *
 * Flags: --steps N (5), --rollouts-per-step K (32), --concurrency C (8), --latency-ms L (50),
 * --warmup-steps W (1), --rounds R (6), --quiet-wait s (20: the longest wait, before each mode, for
 * other processes to calm down), --out file (bench/results/step-blocking.json).
 * CPU used by workerd, by this process and by every other process is measured during each mode; a mode
 * during which other processes used 0.3 cores or more is reported as noisy, and the paired ratio is
 * also given over the quiet rounds only (rounds whose three modes were all quiet).
 */
import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import pLimit from 'p-limit'
import { Miniflare, Response as MiniflareResponse, type Request as MiniflareRequest } from 'miniflare'
import { unstable_readConfig, unstable_splitSqlQuery } from 'wrangler'
import { RewardClient } from '../src/client/index.ts'
import { runSimulation, settle, type StepReport } from '../offline/simulate/loop.ts'
import { simulationRunConfig } from '../offline/simulate/scenario.ts'
import { gradeAllRubrics, type ChatCompletionBody } from '../tests/support/llm-stub.ts'
import { cpuSecondsOf } from './harness.ts'

const ROOT = fileURLToPath(new URL('../', import.meta.url))
const TARGET_RATIO = 1.05
/** Other processes using this many cores or more make a measurement unreliable. */
const NOISY_CORES = 0.3
const STUB_BASE_URL = 'http://llm.stub/v1'
const AGENTS = ['scorer', 'analyzer', 'summarizer', 'meta_summarizer', 'query_generator', 'updater'] as const
type Agent = (typeof AGENTS)[number]

type ModeKey = 'scoring_alone' | 'async_no_wait' | 'async_wait'
const MODES: Record<ModeKey, { label: string; worker: 'app' | 'app-off'; wait: boolean }> = {
  scoring_alone: { label: 'scoring alone (pipeline off)', worker: 'app-off', wait: false },
  async_no_wait: { label: 'async, does not wait (target)', worker: 'app', wait: false },
  async_wait: { label: 'async, waits for update', worker: 'app', wait: true },
}

interface StepBlockingOptions {
  steps: number
  rolloutsPerStep: number
  concurrency: number
  latencyMs: number
  warmupSteps: number
  rounds: number
  quietWaitS: number
  out: string
}

/**
 * Reads the bench's flags, with their defaults.
 * @example const options = readOptions(['--steps', '5', '--latency-ms', '100'])
 */
function readOptions(argv: string[]): StepBlockingOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      steps: { type: 'string' },
      'rollouts-per-step': { type: 'string' },
      concurrency: { type: 'string' },
      'latency-ms': { type: 'string' },
      'warmup-steps': { type: 'string' },
      rounds: { type: 'string' },
      'quiet-wait': { type: 'string' },
      out: { type: 'string' },
    },
  })
  const number = (flag: keyof typeof values, fallback: number, min: number) => {
    const value = Number(values[flag] ?? fallback)
    if (!Number.isFinite(value) || value < min) throw new Error(`--${flag} must be a number ≥ ${min}`)
    return value
  }
  return {
    steps: Math.round(number('steps', 5, 1)),
    rolloutsPerStep: Math.round(number('rollouts-per-step', 32, 1)),
    concurrency: Math.round(number('concurrency', 8, 1)),
    latencyMs: number('latency-ms', 50, 0),
    warmupSteps: Math.round(number('warmup-steps', 1, 0)),
    rounds: Math.round(number('rounds', 6, 1)),
    quietWaitS: number('quiet-wait', 20, 0),
    out: (values.out as string | undefined) ?? join(ROOT, 'bench/results/step-blocking.json'),
  }
}

// ---------------------------------------------------------------------------------------------
// the stub LLM: fixed latency, a valid answer for every agent

/** The opening words of each agent's system prompt (prompts/en), which tell the agents' requests apart. */
function agentOpenings(): [Agent, string][] {
  const file: Record<Agent, string> = {
    scorer: 'scorer',
    analyzer: 'analyzer',
    summarizer: 'summarizer',
    meta_summarizer: 'meta-summarizer',
    query_generator: 'query-generator',
    updater: 'updater',
  }
  return AGENTS.map((agent) => {
    const text = readFileSync(join(ROOT, `prompts/en/${file[agent]}.system.txt`), 'utf8')
    return [agent, text.slice(0, Math.min(60, text.indexOf('{{') >= 0 ? text.indexOf('{{') : 60))]
  })
}

const ANALYSIS = {
  overall_assessment: 'Stub analysis: the answer is plausible.',
  stage_performance: 'On track for this stage.',
  reward_hacking: { flag: false, evidence: [], severity: 'none', tactics: [] },
  advancement_strategy: 'Keep the rubrics.',
  rubric_effectiveness: 'The rubrics judged it consistently.',
  observations: ['stub observation'],
}
const SUMMARY = {
  executive_summary: 'Stub summary of the step.',
  systemic_patterns: ['stub pattern'],
  reward_hacking: { count: 0, tactics: [], examples: [] },
  rubric_meta_evaluation: 'The rubrics separate answers.',
  evolution_plan: 'MAINTENANCE: keep the rubrics.',
  memory_entry: 'stub step summary',
}

/**
 * The updater's reply: the current adaptive set with the first rubric's weight toggled between 1 and 1.5,
 * so every step commits a new rubric version (as an evolving run does) without growing the set.
 */
function updaterReply(user: string): string {
  const section = user.split(/^Current adaptive rubrics.*$/m)[1]?.split(/^Training context/m)[0] ?? ''
  const adaptive = [...section.matchAll(/^- ([\w.:-]+) \(adaptive, weight ([\d.]+)\): (.*)$/gm)].map((match) => ({
    id: match[1]!,
    weight: Number(match[2]),
    text: match[3]!,
  }))
  if (adaptive[0]) adaptive[0].weight = adaptive[0].weight === 1 ? 1.5 : 1
  return JSON.stringify({
    strategy: 'MAINTENANCE',
    consulted_memories: [],
    rationale: 'Stub update: reweight the first adaptive rubric.',
    modifications: [],
    final_adaptive: adaptive,
  })
}

export interface LlmStubCounter {
  handle: (request: MiniflareRequest) => Promise<MiniflareResponse>
  calls: () => Record<Agent | 'unknown', number>
  /** The most requests the stub held at once. */
  maxInFlight: () => number
}

/**
 * A Miniflare outboundService answering OpenAI chat completions after a fixed latency, per agent, serving at most
 * `concurrency` requests at once (later ones wait their turn, as on a GPU server with a bounded batch).
 * @example const stub = fixedLatencyStub(50); new Miniflare({ …, outboundService: stub.handle })
 */
export function fixedLatencyStub(latencyMs: number, concurrency = Infinity): LlmStubCounter {
  const limit = pLimit(Number.isFinite(concurrency) ? concurrency : Number.MAX_SAFE_INTEGER)
  let inFlight = 0
  let maxInFlight = 0
  const openings = agentOpenings()
  const grade = gradeAllRubrics(7)
  const counts: Record<Agent | 'unknown', number> = {
    scorer: 0,
    analyzer: 0,
    summarizer: 0,
    meta_summarizer: 0,
    query_generator: 0,
    updater: 0,
    unknown: 0,
  }
  const handle = async (request: MiniflareRequest): Promise<MiniflareResponse> => {
    const body = (await request.json()) as ChatCompletionBody
    const system = body.messages.find((message) => message.role === 'system')?.content ?? ''
    const user = body.messages.find((message) => message.role === 'user')?.content ?? ''
    const agent = openings.find(([, opening]) => system.startsWith(opening))?.[0]
    counts[agent ?? 'unknown']++
    await limit(async () => {
      maxInFlight = Math.max(maxInFlight, ++inFlight)
      await new Promise((resolve) => setTimeout(resolve, latencyMs))
      inFlight--
    })
    const content =
      agent === 'scorer'
        ? grade(body)
        : agent === 'analyzer'
          ? JSON.stringify(ANALYSIS)
          : agent === 'summarizer' || agent === 'meta_summarizer'
            ? JSON.stringify(SUMMARY)
            : agent === 'query_generator'
              ? JSON.stringify({ queries: ['recent rubric updates and how scores moved'] })
              : agent === 'updater'
                ? updaterReply(user)
                : '{}'
    return MiniflareResponse.json({
      id: `chatcmpl-${counts.scorer + counts.analyzer}`,
      object: 'chat.completion',
      created: 0,
      model: body.model,
      choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content } }],
      usage: { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 },
    })
  }
  return { handle, calls: () => ({ ...counts }), maxInFlight: () => maxInFlight }
}

// ---------------------------------------------------------------------------------------------
// the server: two copies of the Worker in one Miniflare

/** The part of wrangler.toml the bench reads. */
interface WranglerConfig {
  compatibility_date?: string
  compatibility_flags?: string[]
  migrations?: { new_sqlite_classes?: string[] }[]
  durable_objects: { bindings: { name: string; class_name: string }[] }
  queues?: {
    producers?: { binding: string; queue: string }[]
    consumers?: {
      queue: string
      max_batch_size?: number
      max_batch_timeout?: number
      max_retries?: number
      dead_letter_queue?: string
    }[]
  }
  vars?: Record<string, string>
}

/** Runs a command to completion; rejects with its output when it fails. */
function run(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
    child.on('error', reject)
    child.on('close', (code) =>
      code === 0 ? resolvePromise() : reject(new Error(`${command} ${args.join(' ')} exited with ${code}:\n${output}`)),
    )
  })
}

/** CPU seconds the whole machine has spent busy (all cores, /proc/stat); NaN off Linux. */
function machineBusySeconds(): number {
  try {
    const [user = 0, nice = 0, system = 0, , , , , steal = 0] = readFileSync('/proc/stat', 'utf8')
      .split('\n')[0]!
      .trim()
      .split(/\s+/)
      .slice(1)
      .map(Number)
    return (user + nice + system + steal) / 100
  } catch {
    return Number.NaN
  }
}

/**
 * Cores busy: workerd (Worker, Durable Objects, queue consumers), this Node process (loop and stub LLM), every other
 * process.
 */
interface Cores {
  workerd: number
  node: number
  others: number
  /** Wall seconds the meter ran. */
  wall_s: number
}

/** Pids of the workerd processes this Node process started (through Miniflare); Linux only, else []. */
function workerdPids(): number[] {
  try {
    return readdirSync('/proc')
      .filter((name) => /^\d+$/.test(name))
      .filter((pid) => {
        try {
          const [, comm = '', rest = ''] = readFileSync(`/proc/${pid}/stat`, 'utf8').match(/^\d+ \((.*)\) (.*)$/s) ?? []
          return comm.includes('workerd') && Number(rest.split(' ')[1]) === process.pid
        } catch {
          return false
        }
      })
      .map(Number)
  } catch {
    return []
  }
}

/**
 * Starts a CPU meter; calling the result gives the cores used since by workerd, by this Node process, and by every
 * other process.
 */
function cpuMeter(): () => Cores {
  const pids = workerdPids()
  const before = {
    workerd: cpuSecondsOf(pids),
    node: process.cpuUsage(),
    machine: machineBusySeconds(),
    at: performance.now(),
  }
  return () => {
    const wallS = (performance.now() - before.at) / 1_000
    const node = process.cpuUsage(before.node)
    const workerd = (cpuSecondsOf(pids) - before.workerd) / wallS
    const own = (node.user + node.system) / 1e6 / wallS
    return {
      workerd,
      node: own,
      others: Math.max(0, (machineBusySeconds() - before.machine) / wallS - workerd - own),
      wall_s: wallS,
    }
  }
}

/**
 * Waits (up to `maxS`) until the machine, with this bench idle between two modes, uses less than
 * `threshold` cores over half a second: other processes (tests, other benches) would skew the figures.
 * Returns the last load seen, in cores.
 */
async function waitForQuiet(maxS: number, threshold: number): Promise<number> {
  const deadline = performance.now() + maxS * 1_000
  for (;;) {
    const before = machineBusySeconds()
    const started = performance.now()
    await new Promise((resolveTimer) => setTimeout(resolveTimer, 500))
    const load = (machineBusySeconds() - before) / ((performance.now() - started) / 1_000)
    if (!(load >= threshold) || performance.now() >= deadline) return load
  }
}

interface Server {
  mf: Miniflare
  urls: Record<'app' | 'app-off', string>
  adminToken: string
  dispose: () => Promise<void>
}

/**
 * Serves the built Worker twice from one Miniflare: `app` with the pipeline (queues consumed) and
 * `app-off` without it (its queues have no consumer), both calling the stub for every LLM request.
 * @example const server = await startServer('/tmp/build/index.js', fixedLatencyStub(50))
 */
async function startServer(workerScript: string, stub: LlmStubCounter): Promise<Server> {
  const config = unstable_readConfig({ config: join(ROOT, 'wrangler.toml') }) as unknown as WranglerConfig
  // Durable Object and D1 SQLite files on tmpfs when there is one, as bench/score-throughput.ts does by default.
  const persistRoot = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'rh-step-blocking-state-'))
  const sqliteClasses = new Set((config.migrations ?? []).flatMap((migration) => migration.new_sqlite_classes ?? []))
  const durableObjects = Object.fromEntries(
    config.durable_objects.bindings.map((binding) => [
      binding.name,
      { className: binding.class_name, useSQLite: sqliteClasses.has(binding.class_name) },
    ]),
  )
  const adminToken = `rh_admin_${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`
  const bindings = { ...config.vars, DEPLOYMENT: 'local', ADMIN_TOKEN: adminToken }
  const producers = config.queues?.producers ?? []
  const consumers = config.queues?.consumers ?? []
  const worker = (name: 'app' | 'app-off', pipeline: boolean) => ({
    name,
    modules: true,
    scriptPath: workerScript,
    modulesRoot: dirname(workerScript),
    compatibilityDate: config.compatibility_date ?? '2026-04-20',
    compatibilityFlags: config.compatibility_flags ?? [],
    bindings,
    durableObjects,
    d1Databases: { DB: `step-blocking-${name}` },
    // Without the pipeline the same bindings send to queues that nobody consumes.
    queueProducers: Object.fromEntries(
      producers.map((producer) => [
        producer.binding,
        { queueName: pipeline ? producer.queue : `${name}-${producer.queue}` },
      ]),
    ),
    ...(pipeline
      ? {
          queueConsumers: Object.fromEntries(
            consumers.map((consumer) => [
              consumer.queue,
              {
                ...(consumer.max_batch_size === undefined ? {} : { maxBatchSize: consumer.max_batch_size }),
                ...(consumer.max_batch_timeout === undefined ? {} : { maxBatchTimeout: consumer.max_batch_timeout }),
                ...(consumer.max_retries === undefined ? {} : { maxRetries: consumer.max_retries }),
                ...(consumer.dead_letter_queue === undefined ? {} : { deadLetterQueue: consumer.dead_letter_queue }),
              },
            ]),
          ),
        }
      : {}),
    outboundService: stub.handle,
    unsafeDirectSockets: [{ host: '127.0.0.1', port: 0 }],
  })
  const mf = new Miniflare({
    host: '127.0.0.1',
    port: 0,
    cf: false,
    defaultPersistRoot: persistRoot,
    workers: [worker('app', true), worker('app-off', false)],
  })
  try {
    await mf.ready
    for (const name of ['app', 'app-off'] as const) await applyMigrations(mf, name)
    const urls = {
      app: (await mf.unsafeGetDirectURL('app')).origin,
      'app-off': (await mf.unsafeGetDirectURL('app-off')).origin,
    }
    return {
      mf,
      urls,
      adminToken,
      dispose: async () => {
        await mf.dispose()
        rmSync(persistRoot, { recursive: true, force: true })
      },
    }
  } catch (error) {
    await mf.dispose().catch(() => undefined)
    rmSync(persistRoot, { recursive: true, force: true })
    throw error
  }
}

/** migrations/*.sql in name order, statement by statement, into one worker's D1. */
async function applyMigrations(mf: Miniflare, workerName: string): Promise<void> {
  const db = await mf.getD1Database('DB', workerName)
  const dir = join(ROOT, 'migrations')
  for (const file of readdirSync(dir)
    .filter((name) => name.endsWith('.sql'))
    .sort()) {
    for (const sql of unstable_splitSqlQuery(readFileSync(join(dir, file), 'utf8'))) {
      if (sql.replace(/--.*$/gm, '').trim()) await db.prepare(sql).run()
    }
  }
}

/**
 * Creates a run of the simulation's rubrics whose every agent calls the stub; returns its token.
 * @example const token = await createRun(server.urls.app, server.adminToken, 'bench-1')
 */
async function createRun(url: string, adminToken: string, runId: string): Promise<string> {
  const response = await fetch(`${url}/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${adminToken}` },
    body: JSON.stringify({ run_id: runId, config: simulationRunConfig({ baseUrl: STUB_BASE_URL, model: 'stub' }) }),
  })
  const body = (await response.json()) as { token?: string }
  if (response.status !== 201 || !body.token)
    throw new Error(`POST /runs answered ${response.status}: ${JSON.stringify(body)}`)
  return body.token
}

// ---------------------------------------------------------------------------------------------
// measuring

interface ModeRun {
  mode: ModeKey
  round: number
  run_id: string
  /** Measured steps (warm-up left out). */
  steps: StepReport['timings_ms'][]
  /** LLM calls per agent during the run (for the no-wait mode, until the last step returned). */
  calls_during_steps: Record<Agent | 'unknown', number>
  /** LLM calls per agent in all, including the drain after the last step. */
  calls_total: Record<Agent | 'unknown', number>
  /** Machine CPU load (cores) just before the mode started, with the bench idle: other processes. */
  neighbours_cores: number
  /** Cores busy while the trainer stepped. */
  cpu_cores: Cores
  /**
   * workerd CPU time per step (warm-up included), counting the background work that finishes after the last
   * step: what scoring (and the pipeline) cost, unaffected by how busy the machine is.
   */
  workerd_cpu_ms_per_step: number
  errors: number
}

const diff = (after: Record<string, number>, before: Record<string, number>) =>
  Object.fromEntries(Object.entries(after).map(([key, value]) => [key, value - (before[key] ?? 0)])) as Record<
    Agent | 'unknown',
    number
  >

async function measureMode(
  server: Server,
  stub: LlmStubCounter,
  mode: ModeKey,
  round: number,
  options: StepBlockingOptions,
): Promise<ModeRun> {
  const { worker, wait } = MODES[mode]
  const url = server.urls[worker]
  const runId = `bench-${mode.replace(/_/g, '-')}-${round}`
  const token = await createRun(url, server.adminToken, runId)
  const neighbours = options.quietWaitS > 0 ? await waitForQuiet(options.quietWaitS, NOISY_CORES) : 0
  const before = stub.calls()
  const cpu = cpuMeter()
  const result = await runSimulation({
    baseUrl: url,
    token,
    runId,
    steps: options.warmupSteps + options.steps,
    rolloutsPerStep: options.rolloutsPerStep,
    concurrency: options.concurrency,
    seed: round,
    wait,
    observe: false,
    idPrefix: runId,
  })
  const duringSteps = diff(stub.calls(), before)
  const cores = cpu()
  // Let the background work of the last step finish before the next mode (not part of the step times,
  // but part of the work the steps caused: the CPU meter keeps running).
  if (worker === 'app' && !wait) await settle(new RewardClient({ baseUrl: url, token, runId }), 600)
  const all = cpu()
  const stepsRun = result.reports.length
  return {
    mode,
    round,
    run_id: runId,
    steps: result.reports.slice(options.warmupSteps).map((report) => report.timings_ms),
    calls_during_steps: duringSteps,
    calls_total: diff(stub.calls(), before),
    neighbours_cores: neighbours,
    cpu_cores: cores,
    workerd_cpu_ms_per_step: (all.workerd * all.wall_s * 1_000) / Math.max(1, stepsRun),
    errors: result.reports.reduce((sum, report) => sum + report.errors, 0),
  }
}

interface ModeFigures {
  mode: ModeKey
  label: string
  steps: number
  score_ms: { mean: number; p50: number }
  complete_ms: { mean: number }
  wait_ms: { mean: number; p50: number } | null
  trainer_ms: { mean: number; p50: number; p90: number }
  /** Mean trainer-visible step time ÷ mean scoring phase of "scoring alone". */
  ratio: number
  ratio_p50: number
  /**
   * Per round: this mode's mean step time ÷ the same round's mean "scoring alone" scoring phase; and their
   * median, the headline figure (pairing within a round cancels the slow drifts that other processes cause).
   */
  ratio_paired: { per_round: number[]; median: number }
  /**
   * The same over the quiet rounds only (no mode of the round saw other processes use ≥ 0.3 cores); NaN when none was
   * quiet.
   */
  ratio_paired_quiet: { rounds: number[]; per_round: number[]; median: number }
  /**
   * This mode's scoring phase ÷ the scoring phase of "scoring alone": how much the background pipeline slows scoring
   * itself.
   */
  score_phase_ratio: number
  score_sum_ms: { mean: number }
  calls: Record<Agent | 'unknown', number>
  background_calls_during_steps: number
  /** Mean cores busy while the trainer stepped. */
  cpu_cores: Omit<Cores, 'wall_s'>
  /** Mean workerd CPU ms per step, background work included (see ModeRun). */
  workerd_cpu_ms_per_step: number
}

const meanOf = (values: readonly number[]) => values.reduce((sum, value) => sum + value, 0) / Math.max(1, values.length)
const quantileOf = (values: readonly number[], q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted.length
    ? sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!
    : Number.NaN
}

/** A mode's mean trainer-visible step time ÷ the same round's mean scoring-alone phase, per round, and their median. */
function pairedRatios(
  runs: readonly ModeRun[],
  mode: ModeKey,
  rounds?: ReadonlySet<number>,
): { per_round: number[]; median: number } {
  const perRound = runs
    .filter((entry) => entry.mode === mode && (!rounds || rounds.has(entry.round)))
    .map((entry) => {
      const baseline = runs.find((other) => other.mode === 'scoring_alone' && other.round === entry.round)!
      const trainer = entry.steps.map((step) => (mode === 'scoring_alone' ? step.score : step.trainer))
      return meanOf(trainer) / meanOf(baseline.steps.map((step) => step.score))
    })
  const sorted = [...perRound].sort((a, b) => a - b)
  const middle = sorted.length / 2
  const median =
    sorted.length === 0
      ? Number.NaN
      : sorted.length % 2
        ? sorted[Math.floor(middle)]!
        : (sorted[middle - 1]! + sorted[middle]!) / 2
  return { per_round: perRound, median }
}

/** Rounds in which no mode saw other processes use NOISY_CORES or more. */
function quietRounds(runs: readonly ModeRun[]): Set<number> {
  const rounds = new Set(runs.map((entry) => entry.round))
  for (const entry of runs) if (entry.cpu_cores.others >= NOISY_CORES) rounds.delete(entry.round)
  return rounds
}

function figures(runs: readonly ModeRun[], baseline: { mean: number; p50: number }): ModeFigures[] {
  return (Object.keys(MODES) as ModeKey[]).map((mode) => {
    const mine = runs.filter((entry) => entry.mode === mode)
    const steps = mine.flatMap((entry) => entry.steps)
    const score = steps.map((step) => step.score)
    const waits = steps.flatMap((step) => (step.wait === null ? [] : [step.wait]))
    // "Scoring alone" blocks the trainer for its scoring phase only; the others for scoring + /complete (+ wait).
    const trainer = mode === 'scoring_alone' ? score : steps.map((step) => step.trainer)
    const calls = mine.reduce<Record<string, number>>((sum, entry) => {
      for (const [agent, count] of Object.entries(entry.calls_total)) sum[agent] = (sum[agent] ?? 0) + count
      return sum
    }, {}) as Record<Agent | 'unknown', number>
    return {
      mode,
      label: MODES[mode].label,
      steps: steps.length,
      score_ms: { mean: meanOf(score), p50: quantileOf(score, 0.5) },
      complete_ms: { mean: meanOf(steps.map((step) => step.complete)) },
      wait_ms: waits.length ? { mean: meanOf(waits), p50: quantileOf(waits, 0.5) } : null,
      trainer_ms: { mean: meanOf(trainer), p50: quantileOf(trainer, 0.5), p90: quantileOf(trainer, 0.9) },
      ratio: meanOf(trainer) / baseline.mean,
      ratio_paired: pairedRatios(runs, mode),
      ratio_paired_quiet: { rounds: [...quietRounds(runs)], ...pairedRatios(runs, mode, quietRounds(runs)) },
      ratio_p50: quantileOf(trainer, 0.5) / baseline.p50,
      score_phase_ratio: meanOf(score) / baseline.mean,
      score_sum_ms: { mean: meanOf(steps.map((step) => step.score_sum)) },
      calls,
      cpu_cores: {
        workerd: meanOf(mine.map((entry) => entry.cpu_cores.workerd)),
        node: meanOf(mine.map((entry) => entry.cpu_cores.node)),
        others: meanOf(mine.map((entry) => entry.cpu_cores.others)),
      },
      workerd_cpu_ms_per_step: meanOf(mine.map((entry) => entry.workerd_cpu_ms_per_step)),
      background_calls_during_steps: mine.reduce(
        (sum, entry) =>
          sum +
          Object.entries(entry.calls_during_steps)
            .filter(([agent]) => agent !== 'scorer')
            .reduce((s, [, n]) => s + n, 0),
        0,
      ),
    }
  })
}

/**
 * Formats the per-mode figures as a fixed-width table.
 * @example console.log(formatTable(rows))
 */
function formatTable(rows: readonly ModeFigures[]): string {
  const fixed = (value: number, digits: number) => (Number.isFinite(value) ? value.toFixed(digits) : 'n/a')
  const f0 = (value: number) => fixed(value, 0)
  const header =
    `${'mode'.padEnd(32)}${'steps'.padStart(6)}${'score ms'.padStart(10)}${'complete'.padStart(10)}` +
    `${'wait ms'.padStart(9)}${'step ms'.padStart(9)}${'p50'.padStart(7)}${'p90'.padStart(7)}${'ratio'.padStart(8)}` +
    `${'ratio p50'.padStart(10)}${'paired'.padStart(8)}${'workerd cpu'.padStart(12)}${'cpu ms/step'.padStart(12)}` +
    `${'other cpu'.padStart(10)}${'  target'}`
  const lines = rows.map((row) => {
    const target =
      row.mode === 'async_no_wait'
        ? `paired ≤ ${TARGET_RATIO} ${row.ratio_paired.median <= TARGET_RATIO ? 'PASS' : 'FAIL'}`
        : row.mode === 'scoring_alone'
          ? 'baseline'
          : '(info)'
    return (
      `${row.label.padEnd(32)}${String(row.steps).padStart(6)}${f0(row.score_ms.mean).padStart(10)}` +
      `${(row.mode === 'scoring_alone' ? '–' : row.complete_ms.mean.toFixed(1)).padStart(10)}` +
      `${(row.wait_ms ? f0(row.wait_ms.mean) : '–').padStart(9)}${f0(row.trainer_ms.mean).padStart(9)}` +
      `${f0(row.trainer_ms.p50).padStart(7)}${f0(row.trainer_ms.p90).padStart(7)}${row.ratio.toFixed(3).padStart(8)}` +
      `${row.ratio_p50.toFixed(3).padStart(10)}${row.ratio_paired.median.toFixed(3).padStart(8)}` +
      `${fixed(row.cpu_cores.workerd, 2).padStart(12)}${fixed(row.workerd_cpu_ms_per_step, 0).padStart(12)}` +
      `${fixed(row.cpu_cores.others, 2).padStart(10)}  ${target}`
    )
  })
  return [header, '-'.repeat(header.length + 8), ...lines].join('\n')
}

async function main(): Promise<void> {
  const options = readOptions(process.argv.slice(2))
  const command = ['npx tsx bench/step-blocking.ts', ...process.argv.slice(2)].join(' ')
  const started = performance.now()
  const log = (message: string) =>
    console.log(`[${((performance.now() - started) / 1_000).toFixed(1).padStart(5)} s] ${message}`)
  const buildDir = mkdtempSync(join(tmpdir(), 'rh-step-blocking-'))
  log(`building the Worker into ${buildDir}`)
  await run('npx', ['wrangler', 'deploy', '--dry-run', '--outdir', buildDir], {
    ...process.env,
    WRANGLER_SEND_METRICS: 'false',
    CLOUDFLARE_CF_FETCH_ENABLED: 'false',
    NO_UPDATE_NOTIFIER: '1',
  })
  const stub = fixedLatencyStub(options.latencyMs)
  const server = await startServer(join(buildDir, 'index.js'), stub)
  try {
    log(
      `Miniflare: pipeline on at ${server.urls.app}, pipeline off at ${server.urls['app-off']}; stub LLM ` +
        `${options.latencyMs} ms per call`,
    )
    const runs: ModeRun[] = []
    for (let round = 1; round <= options.rounds; round++) {
      for (const mode of Object.keys(MODES) as ModeKey[]) {
        log(
          `round ${round}/${options.rounds}: ${MODES[mode].label}, ${options.warmupSteps} + ${options.steps} steps × ` +
            `${options.rolloutsPerStep} rollouts`,
        )
        runs.push(await measureMode(server, stub, mode, round, options))
      }
    }
    const alone = runs
      .filter((entry) => entry.mode === 'scoring_alone')
      .flatMap((entry) => entry.steps.map((step) => step.score))
    const rows = figures(runs, { mean: meanOf(alone), p50: quantileOf(alone, 0.5) })
    const noWait = rows.find((row) => row.mode === 'async_no_wait')!
    const offCalls = rows.find((row) => row.mode === 'scoring_alone')!.calls
    const runS = (performance.now() - started) / 1_000

    console.log(`\n$ ${command}`)
    console.log(
      `node ${process.version}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}; Miniflare (one workerd) on ` +
        `127.0.0.1 ` +
        `serving the built bundle; the loop in this Node process`,
    )
    console.log(
      `stub LLM: ${options.latencyMs} ms per call for every agent; ${options.rolloutsPerStep} rollouts per step, ` +
        `${options.concurrency} in flight; ${options.steps} measured steps per mode and round (after ` +
        `${options.warmupSteps} warm-up), ${options.rounds} round(s) interleaved\n`,
    )
    console.log(formatTable(rows))
    console.log(
      `\nstep ms = what the trainer blocks for: the scoring phase for "scoring alone"; scoring + /complete (+ ` +
        `/rubric_status/wait) for the async modes.`,
    )
    console.log(
      `ratio = mean step ms ÷ mean scoring phase of "scoring alone", all rounds pooled; ratio p50: the same with ` +
        `medians; paired: the median over rounds of (this mode's mean step ms ÷ the same round's ` +
        `scoring-alone mean), ` +
        `the figure held to the target.`,
    )
    console.log(
      `cpu = cores busy while the trainer stepped: workerd (Worker, Durable Objects, queue consumers) and every ` +
        `process other than this bench; cpu ms/step = workerd CPU time per step, including background work that ends ` +
        `after the last step.`,
    )
    console.log(
      `The pipeline costs workerd ${(noWait.workerd_cpu_ms_per_step - rows[0]!.workerd_cpu_ms_per_step).toFixed(0)} ` +
        `ms of CPU per step of ${options.rolloutsPerStep} rollouts on top of scoring's ` +
        `${rows[0]!.workerd_cpu_ms_per_step.toFixed(0)} ms; with a core to spare it runs beside the trainer, on a ` +
        `busy machine it competes with /score.`,
    )
    console.log(
      `Per-round paired ratios of "async, does not wait": ` +
        `${noWait.ratio_paired.per_round.map((ratio) => ratio.toFixed(3)).join(', ')}.`,
    )
    const quiet = noWait.ratio_paired_quiet
    console.log(
      quiet.rounds.length
        ? `quiet rounds (${quiet.rounds.join(', ')}): paired ratio of "async, does not wait" ` +
            `${quiet.median.toFixed(3)} (${quiet.per_round.map((ratio) => ratio.toFixed(3)).join(', ')}); of "async, ` +
            `waits for update" ${rows.find((row) => row.mode === 'async_wait')!.ratio_paired_quiet.median.toFixed(3)}.`
        : 'no round was quiet (other processes used ≥ 0.3 cores in every round): the figures mix in their load.',
    )
    console.log(
      `async, does not wait: its scoring phase alone is ${noWait.score_phase_ratio.toFixed(3)} × scoring alone; ` +
        `${noWait.background_calls_during_steps} background LLM calls (analyzer, summarizer, query generator, ` +
        `updater) ran while the trainer was stepping.`,
    )
    console.log(
      `LLM calls per agent: ${rows
        .map(
          (row) =>
            `${row.label}: ${Object.entries(row.calls)
              .filter(([, n]) => n > 0)
              .map(([agent, n]) => `${agent} ${n}`)
              .join(', ')}`,
        )
        .join(' | ')}`,
    )
    const noisy = runs.filter((entry) => entry.cpu_cores.others >= NOISY_CORES)
    if (noisy.length)
      console.log(
        `WARNING: other processes used ≥ ${NOISY_CORES} cores while the trainer stepped in ` +
          noisy
            .map((entry) => `${entry.mode} (round ${entry.round}): ${entry.cpu_cores.others.toFixed(2)}`)
            .join('; ') +
          ' — rerun on a quiet machine for reliable figures',
      )
    const errors = runs.reduce((sum, entry) => sum + entry.errors, 0)
    if (errors) console.log(`WARNING: ${errors} /score request(s) failed`)
    if (Object.entries(offCalls).some(([agent, n]) => agent !== 'scorer' && n > 0))
      console.log('WARNING: the pipeline-off worker made non-scorer LLM calls')
    console.log(`\nrun time ${runS.toFixed(1)} s; JSON: ${relative(process.cwd(), options.out)}`)

    mkdirSync(dirname(options.out), { recursive: true })
    writeFileSync(
      options.out,
      `${JSON.stringify(
        {
          command,
          at: new Date().toISOString(),
          machine: { node: process.version, cpus: cpus().length, cpu_model: cpus()[0]?.model ?? null },
          options,
          target: { async_no_wait_paired_ratio_max: TARGET_RATIO },
          pass: noWait.ratio_paired.median <= TARGET_RATIO,
          reliable: runs.every((entry) => !(entry.cpu_cores.others >= NOISY_CORES)),
          modes: rows,
          runs,
          run_s: runS,
        },
        null,
        2,
      )}\n`,
    )
    if (errors) process.exitCode = 1
  } finally {
    await server.dispose()
    rmSync(buildDir, { recursive: true, force: true })
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((error: unknown) => {
    console.error(error)
    process.exit(1)
  })
}
