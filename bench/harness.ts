/**
 * Shared machinery of the /score benchmarks: build the Worker bundle, serve it from Miniflare with its
 * Durable Objects, D1 and a zero-latency stub LLM, and drive it with autocannon from this process.
 * Used by bench/score-throughput.ts (the headline figures), bench/cost.ts (what a /score costs) and the others.
 */
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { request as httpRequest } from 'node:http'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import autocannon from 'autocannon'
import {
  Log,
  LogLevel,
  Miniflare,
  Response as MiniflareResponse,
  type Request as MiniflareRequest,
  type WorkerOptions,
} from 'miniflare'
import { unstable_getMiniflareWorkerOptions, unstable_readConfig, unstable_splitSqlQuery } from 'wrangler'
import { chatCompletion, gradeAllRubrics, type ChatCompletionBody } from '../tests/support/llm-stub.ts'

export const ROOT = fileURLToPath(new URL('../', import.meta.url))

/** Host names the Miniflare router sends to the auxiliary workers (the Worker under test is the default). */
export const BARE_HOST = 'bare.bench'
export const FLOOR_HOST = 'floor.bench'
/** The stub LLM's base URL as the scorer agent sees it; every outbound fetch of the Worker lands in the stub. */
const STUB_BASE_URL = 'http://llm.stub/v1'
/** The grade the stub gives every rubric. */
export const STUB_GRADE = 7

/** The part of wrangler.toml the bench reads (wrangler's own Config type does not resolve here). */
interface WranglerConfig {
  name?: string
  compatibility_date?: string
  compatibility_flags?: string[]
  migrations?: { new_sqlite_classes?: string[] }[]
  durable_objects: { bindings: { name: string; class_name: string }[] }
  d1_databases: { binding: string; database_name: string }[]
}

/**
 * Reads a wrangler config (the project's wrangler.toml unless told otherwise) as wrangler itself does.
 * @example const { compatibility_date } = readWranglerConfig()
 */
function readWranglerConfig(path = join(ROOT, 'wrangler.toml')): WranglerConfig {
  return unstable_readConfig({ config: path }) as WranglerConfig
}

export interface Bundles {
  /** The Worker under test, as `wrangler deploy --dry-run` emits it. */
  workerScript: string
  /** The bare Hono reference worker. */
  bareScript: string
  /** The floor Worker (bench/floor-worker.ts), when asked for: served on Host `floor.bench`. */
  floorScript?: string
  compatibilityDate: string
  compatibilityFlags: string[]
  /**
   * The Worker's Miniflare options (bindings, Durable Objects, D1, queues, vars) from the wrangler.toml the
   * bundle was built with, so a config edited mid-run cannot disagree with the bundle. Never holds .dev.vars.
   */
  workerOptions: WorkerOptions
  /** Wall time of the builds (they run in parallel). */
  buildMs: number
}

/**
 * Runs a command to completion, returning its output; rejects with that output when it fails.
 * @example await run('npx', ['wrangler', '--version'], { cwd: ROOT })
 */
export function run(
  command: string,
  args: string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv },
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let output = ''
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
    child.on('error', reject)
    child.on('close', (code) =>
      code === 0 ? resolve(output) : reject(new Error(`${command} ${args.join(' ')} exited with ${code}:\n${output}`)),
    )
  })
}

/**
 * Builds the Worker (wrangler.toml) and the bare reference worker into `outDir`, offline, in parallel; with `floor`,
 * the floor Worker too (only `npm run bench` serves it).
 * @example const bundles = await buildBundles('/tmp/bench-build', { floor: true })
 */
export async function buildBundles(outDir: string, options: { floor?: boolean } = {}): Promise<Bundles> {
  // A copy outside the project: wrangler finds no .dev.vars (secrets) next to it.
  const configCopy = join(outDir, 'wrangler.toml')
  copyFileSync(join(ROOT, 'wrangler.toml'), configCopy)
  const config = readWranglerConfig(configCopy)
  const compatibilityDate = config.compatibility_date ?? '2026-04-20'
  const compatibilityFlags = config.compatibility_flags ?? []
  const { workerOptions } = unstable_getMiniflareWorkerOptions(configCopy)
  const env = {
    ...process.env,
    WRANGLER_SEND_METRICS: 'false',
    CLOUDFLARE_CF_FETCH_ENABLED: 'false',
    NO_UPDATE_NOTIFIER: '1',
  }
  const started = performance.now()
  const auxiliary = (name: string) =>
    run(
      'npx',
      [
        'wrangler',
        'deploy',
        '--dry-run',
        '--outdir',
        join(outDir, name),
        '--config',
        join(ROOT, `bench/${name}-worker.wrangler.toml`),
        '--compatibility-date',
        compatibilityDate,
      ],
      { cwd: ROOT, env },
    )
  await Promise.all([
    run('npx', ['wrangler', 'deploy', '--dry-run', '--outdir', join(outDir, 'worker')], { cwd: ROOT, env }),
    auxiliary('bare'),
    ...(options.floor ? [auxiliary('floor')] : []),
  ])
  return {
    workerScript: join(outDir, 'worker', 'index.js'),
    bareScript: join(outDir, 'bare', 'bare-worker.js'),
    ...(options.floor ? { floorScript: join(outDir, 'floor', 'floor-worker.js') } : {}),
    compatibilityDate,
    compatibilityFlags,
    workerOptions: workerOptions as WorkerOptions,
    buildMs: performance.now() - started,
  }
}

/** A tiny worker that answers chat completions inside workerd itself (the `worker` stub variant). */
const IN_WORKERD_STUB = `
export default {
  async fetch(request) {
    const body = await request.json()
    const user = (body.messages.find((m) => m.role === 'user') || {}).content || ''
    // Same format as gradeAllRubrics in tests/support/llm-stub.ts: "- <id> (weight w): text".
    const ids = [...user.matchAll(/^- ([\\w.:-]+) \\(weight [\\d.]+\\):/gm)].map((m) => m[1])
    const content = JSON.stringify({ grades: ids.map((rubric_id) => ({ rubric_id, grade: ${STUB_GRADE}, reason: 'stub' \
})) })
    return Response.json({ id: 'chatcmpl-stub', object: 'chat.completion', created: 0, model: body.model,
      choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content } }],
      usage: { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 } })
  },
}
`

export type StubKind = 'node' | 'worker' | 'process'

/**
 * Starts bench/loopback-llm-stub.ts in a child Node process on 127.0.0.1, with `env` laid over its environment
 * (`STUB_LATENCY_MS`, `STUB_REPLY`); resolves with its base URL, a call counter and a stop function.
 * @example const stub = await startLoopbackStub({ STUB_LATENCY_MS: '20' }); … ; stub.stop()
 */
export async function startLoopbackStub(env: Record<string, string> = {}): Promise<{
  baseUrl: string
  calls: () => Promise<number>
  /** Request bytes the stub has read. */
  bytes: () => Promise<number>
  pid: number
  stop: () => void
}> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'bench/loopback-llm-stub.ts')], {
    cwd: ROOT,
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, STUB_GRADE: String(STUB_GRADE), ...env },
  })
  const stop = () => void child.kill()
  const forget = onInterrupt(stop)
  const port = await new Promise<number>((resolve, reject) => {
    child.once('error', reject)
    child.once('exit', (code) => reject(new Error(`the loopback stub LLM exited with ${code} before listening`)))
    child.stdout!.once('data', (chunk: Buffer) =>
      resolve((JSON.parse(chunk.toString('utf8')) as { port: number }).port),
    )
  })
  const origin = `http://127.0.0.1:${port}`
  return {
    baseUrl: `${origin}/v1`,
    calls: async () => Number(await (await fetch(`${origin}/calls`)).text()),
    bytes: async () => Number(await (await fetch(`${origin}/bytes`)).text()),
    pid: child.pid!,
    stop: () => {
      forget()
      stop()
    },
  }
}

export type StorageKind = 'memory' | 'disk'

/**
 * A fresh directory for Miniflare's Durable Object and D1 SQLite files: on tmpfs (/dev/shm) for `memory`,
 * else under the OS temp dir (Miniflare's own default, on disk here). Remove it with `rmSync` after use.
 * @example const root = storageRoot('memory') // '/dev/shm/rh-bench-state-Ab12Cd'
 */
export function storageRoot(kind: StorageKind): string {
  const base = kind === 'memory' && existsSync('/dev/shm') ? '/dev/shm' : tmpdir()
  return mkdtempSync(join(base, 'rh-bench-state-'))
}

export interface BenchServer {
  mf: Miniflare
  /** e.g. http://127.0.0.1:40123 */
  url: string
  adminToken: string
  /** The stub LLM's base URL, for the scorer of a bench run (`stubRunConfig(server.stubBaseUrl)`). */
  stubBaseUrl: string
  /** Chat completions the stub has answered (the `node` and `process` stubs; 0 for `worker`). */
  stubCalls: () => Promise<number>
  /** Where the Durable Objects' and D1's SQLite files live. */
  persistRoot: string
  dispose: () => Promise<void>
}

/**
 * Starts one Miniflare (one workerd process) on 127.0.0.1 serving the Worker under test with its Durable
 * Objects (SQLite-backed) and D1 (migrations applied), plus the bare worker on Host `bare.bench` and, when built,
 * the floor Worker on Host `floor.bench`, whose judge calls go where the Worker's go.
 * `stub: 'node'` answers the Worker's outbound fetches with a Node function (Miniflare `outboundService`);
 * `stub: 'worker'` answers them from a second worker inside workerd; `stub: 'process'` is an HTTP server on
 * loopback in a child Node process, which the Worker fetches directly (no outboundService). `storage` picks where the
 * SQLite files of Durable Objects and D1 live (see `storageRoot`).
 * @example const server = await startBench(bundles, { stub: 'node', storage: 'memory' })
 */
export async function startBench(
  bundles: Bundles,
  options: {
    stub: StubKind
    storage: StorageKind
    workerScript?: string
    inspectorPort?: number
    workerOptions?: WorkerOptions
    migrationsDir?: string
    /** Serve the state kept in this directory (a restart), and leave it there on dispose. */
    persistRoot?: string
    /** Answers the Worker's outbound fetches instead of the zero-latency judge (with `stub: 'node'`). */
    outbound?: (request: MiniflareRequest) => Promise<MiniflareResponse>
    /** Overrides of the Worker's vars. */
    vars?: Record<string, string>
    /** Step jobs the local queue broker hands the consumer at once (it runs one batch at a time). */
    stepJobsPerBatch?: number
    /** Leave out the Worker's service bindings to itself (JUDGE): a large batch is then judged in one invocation. */
    withoutSelfBindings?: boolean
  },
): Promise<BenchServer> {
  const workerOptions = options.workerOptions ?? bundles.workerOptions
  const loopback = options.stub === 'process' ? await startLoopbackStub() : undefined
  const persistRoot = options.persistRoot ?? storageRoot(options.storage)
  const removeState = () => {
    if (!options.persistRoot) rmSync(persistRoot, { recursive: true, force: true })
  }
  const forgetCleanup = onInterrupt(removeState)
  const adminToken = `rh_admin_${randomBytes(24).toString('hex')}`
  const judge = gradeAllRubrics(STUB_GRADE)
  let calls = 0
  const nodeStub = async (request: MiniflareRequest): Promise<MiniflareResponse> => {
    const body = (await request.json()) as ChatCompletionBody
    calls++
    return MiniflareResponse.json(chatCompletion(body, judge(body), calls))
  }
  // The stub LLM: a loopback server is fetched directly; the others answer as the outbound service.
  const outbound = loopback
    ? {}
    : { outboundService: options.stub === 'node' ? (options.outbound ?? nodeStub) : 'llm-stub' }
  const common = {
    modules: true,
    compatibilityDate: bundles.compatibilityDate,
    compatibilityFlags: bundles.compatibilityFlags,
  }
  const mf = new Miniflare({
    // BENCH_LOG=warn|info|debug shows workerd's own messages (isolate restarts, uncaught errors) during a bench.
    ...(process.env.BENCH_LOG
      ? { log: new Log(LogLevel[process.env.BENCH_LOG.toUpperCase() as 'WARN' | 'INFO' | 'DEBUG'] ?? LogLevel.WARN) }
      : {}),
    host: '127.0.0.1',
    port: 0,
    cf: false,
    ...(options.inspectorPort ? { inspectorPort: options.inspectorPort } : {}),
    defaultPersistRoot: persistRoot,
    workers: [
      {
        // Everything wrangler.toml declares (Durable Objects, D1, queues and their consumers, vars)...
        ...workerOptions,
        ...common,
        name: 'app',
        // ...served from the built bundle, with the local deployment's vars and a fresh admin token.
        scriptPath: options.workerScript ?? bundles.workerScript,
        modulesRoot: dirname(options.workerScript ?? bundles.workerScript),
        bindings: { ...workerOptions.bindings, ...options.vars, DEPLOYMENT: 'local', ADMIN_TOKEN: adminToken },
        ...(options.stepJobsPerBatch
          ? { queueConsumers: withBatchSize(workerOptions.queueConsumers, options.stepJobsPerBatch) }
          : {}),
        // wrangler.toml binds the Worker to itself by its deployed name; here it is `app`.
        serviceBindings: options.withoutSelfBindings ? {} : selfBindings(workerOptions.serviceBindings),
        // The rate limiter still runs on every request, but one bench client must never be refused.
        ratelimits: Object.fromEntries(
          Object.keys(workerOptions.ratelimits ?? {}).map((name) => [
            name,
            { simple: { limit: 1_000_000_000, period: 10 } },
          ]),
        ),
        ...outbound,
      },
      {
        ...common,
        name: 'bare',
        scriptPath: bundles.bareScript,
        modulesRoot: dirname(bundles.bareScript),
        routes: [`${BARE_HOST}/*`],
      },
      { ...common, name: 'llm-stub', script: IN_WORKERD_STUB },
      ...(bundles.floorScript
        ? [
            {
              ...common,
              name: 'floor',
              scriptPath: bundles.floorScript,
              modulesRoot: dirname(bundles.floorScript),
              routes: [`${FLOOR_HOST}/*`],
              durableObjects: { FLOOR_LEDGER: { className: 'FloorLedger', useSQLite: true } },
              bindings: { JUDGE_URL: loopback?.baseUrl ?? STUB_BASE_URL },
              ...outbound,
            },
          ]
        : []),
    ],
  })
  let url: string
  try {
    url = (await mf.ready).origin
    if (!options.persistRoot) await applyMigrations(mf, options.migrationsDir)
  } catch (error) {
    forgetCleanup()
    loopback?.stop()
    await mf.dispose().catch(() => undefined)
    removeState()
    throw error
  }
  return {
    mf,
    url,
    adminToken,
    stubBaseUrl: loopback?.baseUrl ?? STUB_BASE_URL,
    stubCalls: async () => (loopback ? loopback.calls() : calls),
    persistRoot,
    dispose: async () => {
      forgetCleanup()
      loopback?.stop()
      await mf.dispose()
      removeState()
    },
  }
}

/** Service bindings whose target is this Worker (by its wrangler name), pointed at `app`, the name it has here. */
function selfBindings(bindings: WorkerOptions['serviceBindings']): WorkerOptions['serviceBindings'] {
  const own = readWranglerConfig().name
  return Object.fromEntries(
    Object.entries(bindings ?? {}).map(([binding, target]) => [
      binding,
      typeof target === 'object' && target !== null && 'name' in target && target.name === own
        ? { ...target, name: 'app' }
        : target,
    ]),
  )
}

const cleanups = new Set<() => void>()
let signalsHooked = false

/**
 * Registers synchronous cleanup (removing temp dirs) for an interrupted run (Ctrl-C, SIGTERM), and returns
 * the function that unregisters it once done normally. It runs first and synchronously because imported
 * tooling exits the process from its own signal handlers; Miniflare's exit hook stops workerd.
 * @example const forget = onInterrupt(() => rmSync(dir, { recursive: true, force: true })); … ; forget()
 */
export function onInterrupt(cleanup: () => void): () => void {
  if (!signalsHooked) {
    signalsHooked = true
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.prependListener(signal, () => {
        for (const fn of cleanups) {
          try {
            fn()
          } catch {
            // best effort: keep cleaning up the rest
          }
        }
        process.exit(signal === 'SIGINT' ? 130 : 143)
      })
    }
  }
  cleanups.add(cleanup)
  return () => void cleanups.delete(cleanup)
}

/**
 * Applies the *.sql migrations of `dir` (the project's unless told) in name order to the Worker's D1 database.
 * @example await applyMigrations(mf)
 */
export async function applyMigrations(mf: Miniflare, dir = join(ROOT, 'migrations')): Promise<number> {
  const db = await mf.getD1Database('DB', 'app')
  let statements = 0
  for (const file of readdirSync(dir)
    .filter((name) => name.endsWith('.sql'))
    .sort()) {
    for (const sql of unstable_splitSqlQuery(readFileSync(join(dir, file), 'utf8'))) {
      if (!sql.replace(/--.*$/gm, '').trim()) continue
      await db.prepare(sql).run()
      statements++
    }
  }
  return statements
}

/**
 * The default run's rubrics (config/default-run.json) in a run whose scorer calls the stub LLM.
 * @example const config = stubRunConfig()
 */
export function stubRunConfig(baseUrl = STUB_BASE_URL): Record<string, unknown> {
  const defaults = JSON.parse(readFileSync(join(ROOT, 'config/default-run.json'), 'utf8')) as Record<string, unknown>
  const { $comment: _comment, ...config } = defaults
  return {
    ...config,
    access: 'token',
    agents: {
      default: { backend: 'mock', model: 'mock-heuristic-1' },
      scorer: { backend: 'openai', base_url: baseUrl, model: 'stub' },
    },
  }
}

/**
 * Creates a run through `POST /runs` with the admin token; returns its run token.
 * @example const token = await createRun(server, 'bench-stub', stubRunConfig())
 */
export async function createRun(server: BenchServer, runId: string, config: Record<string, unknown>): Promise<string> {
  const response = await fetch(`${server.url}/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${server.adminToken}` },
    body: JSON.stringify({ run_id: runId, config }),
  })
  const body = (await response.json()) as { token?: string }
  if (response.status !== 201 || !body.token)
    throw new Error(`POST /runs answered ${response.status}: ${JSON.stringify(body)}`)
  return body.token
}

/** What `GET /runs/<id>/rubric_status` says of a run's step, as far as the benches read it. */
export interface StepStatus {
  step: number
  status: string
}

/**
 * Reads the run's `/rubric_status` every `intervalMs` until `reached` holds; throws after `timeoutMs`, saying what it
 * waited for and the last status.
 * @example await waitForStatus(server, runId, token, (s) => s.step > 2, 'step 2 to close', { timeoutMs: 120_000 })
 */
export async function waitForStatus(
  server: BenchServer,
  runId: string,
  token: string,
  reached: (status: StepStatus) => boolean,
  what: string,
  { timeoutMs = 180_000, intervalMs = 250 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const status = (await (
      await fetch(`${server.url}/runs/${runId}/rubric_status`, { headers: { authorization: `Bearer ${token}` } })
    ).json()) as StepStatus
    if (reached(status)) return
    if (Date.now() > deadline)
      throw new Error(`run ${runId}: waited ${timeoutMs / 1_000} s for ${what}; last ${JSON.stringify(status)}`)
    await new Promise((resolve) => setTimeout(resolve, intervalMs))
  }
}

const WORDS = (
  'the answer follows from the definition so we compute each term carefully then add them and check the result ' +
  'against the reference value'
).split(' ')
let bodyCounter = 0

/**
 * A fresh `POST /score` body: a rollout id and output text never sent before (so neither the ledger's
 * idempotency nor the score cache answers it), with an output of about `outputChars` characters.
 * @example const body = nextScoreBody('stub', 1200)
 */
export function nextScoreBody(prefix: string, outputChars: number): string {
  const n = ++bodyCounter
  const words: string[] = [`Attempt ${n}:`]
  for (let i = 0, length = 0; length < outputChars; i++) {
    const word = WORDS[(n + i * 7) % WORDS.length]!
    words.push(word)
    length += word.length + 1
  }
  words.push(`so the final answer is ${n % 97}.`)
  return JSON.stringify({
    rollout: {
      id: `${prefix}-${process.pid}-${n}`,
      input:
        'A train leaves at 9:00 at 80 km/h; a second leaves the same station at 10:00 at 120 km/h on the same track. ' +
        'When does the second catch up? Show your reasoning.',
      output: words.join(' '),
      supplemental_context: 'It catches up at 12:00, 240 km from the station.',
    },
    metadata: {
      high_level_goal: 'math word problems with verifiable answers',
      model_size: '7B',
      current_step: 3,
      total_steps: 100,
    },
  })
}

export interface LoadTarget {
  label: string
  /** Path on the server, e.g. `/score` or `/runs/bench-stub/score`. */
  path: string
  headers?: Record<string, string>
  /** Prefix of the rollout ids this target sends. */
  prefix: string
}

export interface Measurement {
  label: string
  connections: number
  durationS: number
  requests2xx: number
  non2xx: number
  errors: number
  /** What the errors were (socket error code or message → count). */
  errorKinds: Record<string, number>
  timeouts: number
  statusCodes: Record<string, number>
  /** 2xx responses per second over the measured window. */
  rps: number
  /** Latency percentiles in ms, from every 2xx response's own timing (sub-millisecond precision). */
  latency: { p50: number; p90: number; p99: number; mean: number; max: number }
  /**
   * CPU seconds per wall second (1.0 = one core busy) of workerd, of this Node process (autocannon and the
   * Node stub LLM), and of every other process on the machine (a busy neighbour makes the figures unreliable).
   */
  cpu: { workerd: number; node: number; other: number }
  /**
   * workerd CPU ms per 2xx response: within the window, and all-in — the window plus the background work
   * (queue consumers, waitUntil) it left behind, drained after it. Null when the drain did not finish.
   */
  workerdCpuMsPerRequest: { window: number; allIn: number | null }
  /** Seconds spent waiting for the warm-up's background work before the window, and for the window's after it. */
  idleWaitS: { settle: number; drain: number }
}

/** A shared allowance of seconds for idle waits, so a run's total length stays bounded. */
export interface IdleBudget {
  remainingS: number
}

async function waitWithin(
  budget: IdleBudget | undefined,
  capS: number,
): Promise<{ waitedS: number; drained: boolean }> {
  const maxS = Math.min(capS, budget?.remainingS ?? capS)
  if (maxS <= 0) return { waitedS: 0, drained: false }
  const idle = await waitForIdle(maxS, Number.POSITIVE_INFINITY)
  if (budget) budget.remainingS -= idle.waitedS
  return { waitedS: idle.waitedS, drained: idle.workerd < 0.05 }
}

/**
 * Loads one target with autocannon and measures 2xx req/s, latency and CPU: a warm-up of `warmupS`, a wait
 * (up to `idleCapS`, within `budget`) for the background work it left to finish, the measured window, then
 * a wait for the window's own background work, so the all-in workerd CPU per request can be counted.
 * @example const m = await measure(server.url, { label: 'bare', path: '/score', prefix: 'bare' }, { connections: 64,
 *   durationS: 10, warmupS: 2, outputChars: 1200 })
 */
export async function measure(
  url: string,
  target: LoadTarget,
  options: {
    connections: number
    durationS: number
    warmupS: number
    outputChars: number
    idleCapS?: number
    budget?: IdleBudget
  },
): Promise<Measurement> {
  const idleCapS = options.idleCapS ?? 15
  let errorKinds: Record<string, number> = {}
  const fire = (durationS: number, onLatency?: (ms: number) => void) => {
    const instance = autocannon({
      url,
      connections: options.connections,
      duration: durationS,
      timeout: 30,
      requests: [
        {
          method: 'POST',
          path: target.path,
          headers: { 'content-type': 'application/json', ...target.headers },
          setupRequest: (request) => ({ ...request, body: nextScoreBody(target.prefix, options.outputChars) }),
        },
      ],
    })
    if (onLatency)
      instance.on(
        'response',
        (_client: unknown, status: number, _bytes: number, ms: number) => status < 300 && onLatency(ms),
      )
    instance.on('reqError', (error: Error & { code?: string }) => {
      const kind = error.code ?? error.message
      errorKinds[kind] = (errorKinds[kind] ?? 0) + 1
    })
    return instance
  }
  if (options.warmupS > 0) await fire(options.warmupS)
  const settle = options.warmupS > 0 ? await waitWithin(options.budget, idleCapS) : { waitedS: 0, drained: true }
  const latencies: number[] = []
  errorKinds = {}
  const workerd = workerdPids()
  const cpuBefore = { workerd: cpuSecondsOf(workerd), node: process.cpuUsage(), machine: machineBusySeconds() }
  const started = performance.now()
  const result = await fire(options.durationS, (ms) => latencies.push(ms))
  const wallS = (performance.now() - started) / 1_000
  const nodeCpu = process.cpuUsage(cpuBefore.node)
  const workerdAfterWindow = cpuSecondsOf(workerd)
  const workerdCores = (workerdAfterWindow - cpuBefore.workerd) / wallS
  const nodeCores = (nodeCpu.user + nodeCpu.system) / 1e6 / wallS
  const machineCores = (machineBusySeconds() - cpuBefore.machine) / wallS
  const cpu = { workerd: workerdCores, node: nodeCores, other: Math.max(0, machineCores - workerdCores - nodeCores) }
  const drain = await waitWithin(options.budget, idleCapS)
  const workerdAllIn = cpuSecondsOf(workerd) - cpuBefore.workerd
  const perRequest = (seconds: number) => (seconds * 1_000) / Math.max(1, result['2xx'])
  latencies.sort((a, b) => a - b)
  const windowS = (result.finish.getTime() - result.start.getTime()) / 1_000 || options.durationS
  return {
    label: target.label,
    connections: options.connections,
    durationS: windowS,
    requests2xx: result['2xx'],
    non2xx: result.non2xx,
    errors: result.errors,
    errorKinds,
    timeouts: result.timeouts,
    statusCodes: Object.fromEntries(Object.entries(result.statusCodeStats).map(([code, stats]) => [code, stats.count])),
    rps: result['2xx'] / windowS,
    latency: {
      p50: percentile(latencies, 50),
      p90: percentile(latencies, 90),
      p99: percentile(latencies, 99),
      mean: latencies.reduce((sum, ms) => sum + ms, 0) / Math.max(1, latencies.length),
      max: latencies.at(-1) ?? Number.NaN,
    },
    cpu,
    workerdCpuMsPerRequest: {
      window: perRequest(workerdAfterWindow - cpuBefore.workerd),
      allIn: drain.drained ? perRequest(workerdAllIn) : null,
    },
    idleWaitS: { settle: settle.waitedS, drain: drain.waitedS },
  }
}

/**
 * The p-th percentile (nearest rank) of ascending samples; NaN when there are none.
 * @example percentile([1, 2, 3, 4], 50) // 2
 */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!
}

/**
 * Pids of the workerd processes this Node process started (through Miniflare); Linux only, else [].
 * @example workerdPids() // [12345]
 */
export function workerdPids(): number[] {
  try {
    return readdirSync('/proc')
      .filter((name) => /^\d+$/.test(name))
      .filter((pid) => {
        try {
          const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
          const [, comm = '', rest = ''] = stat.match(/^\d+ \((.*)\) (.*)$/s) ?? []
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
 * User + system CPU seconds consumed so far by the given pids (all their threads); NaN off Linux.
 * @example cpuSecondsOf(workerdPids())
 */
export function cpuSecondsOf(pids: readonly number[]): number {
  if (pids.length === 0) return Number.NaN
  let ticks = 0
  for (const pid of pids) {
    const fields = (readFileSync(`/proc/${pid}/stat`, 'utf8').match(/\) (.*)$/s)?.[1] ?? '').split(' ')
    ticks += Number(fields[11]) + Number(fields[12])
  }
  return ticks / 100
}

/**
 * Waits (up to `maxS`) until the machine is calm over half a second: workerd has finished the background
 * work earlier load left behind (queue consumers, waitUntil) — under `workerdThreshold` cores — and other
 * processes use under `othersThreshold` cores. Returns the last loads seen and the time waited.
 * @example const { others, workerd, waitedS } = await waitForIdle(10)
 */
export async function waitForIdle(
  maxS: number,
  othersThreshold = 0.3,
  workerdThreshold = 0.05,
): Promise<{ others: number; workerd: number; waitedS: number }> {
  const started = performance.now()
  const workerd = workerdPids()
  for (;;) {
    const before = {
      machine: machineBusySeconds(),
      workerd: cpuSecondsOf(workerd),
      node: process.cpuUsage(),
      at: performance.now(),
    }
    await new Promise((resolve) => setTimeout(resolve, 500))
    const wallS = (performance.now() - before.at) / 1_000
    const node = process.cpuUsage(before.node)
    const workerdCores = (cpuSecondsOf(workerd) - before.workerd || 0) / wallS
    const others = Math.max(
      0,
      (machineBusySeconds() - before.machine) / wallS - workerdCores - (node.user + node.system) / 1e6 / wallS,
    )
    const waitedS = (performance.now() - started) / 1_000
    if ((!(others >= othersThreshold) && !(workerdCores >= workerdThreshold)) || waitedS >= maxS)
      return { others, workerd: workerdCores, waitedS }
  }
}

/**
 * CPU seconds the whole machine has spent busy (all cores, from /proc/stat); NaN off Linux.
 * @example const before = machineBusySeconds()
 */
function machineBusySeconds(): number {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number)
    // irq/softirq left out: loopback networking of the load itself lands there, not in any process.
    const [user = 0, nice = 0, system = 0, , , , , steal = 0] = fields
    return (user + nice + system + steal) / 100
  } catch {
    return Number.NaN
  }
}

/**
 * Sends one fresh /score request over plain HTTP (so a Host header can pick the worker) and returns the
 * parsed answer; throws on a non-2xx status.
 * @example const result = await scoreOnce(server.url, { label: 'mock', path: '/score', prefix: 'check' })
 */
export function scoreOnce(url: string, target: LoadTarget, outputChars = 1200): Promise<Record<string, unknown>> {
  const body = nextScoreBody(target.prefix, outputChars)
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${url}${target.path}`,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...target.headers },
      },
      (res) => {
        let text = ''
        res.setEncoding('utf8')
        res.on('data', (chunk: string) => (text += chunk))
        res.on('end', () => {
          if ((res.statusCode ?? 500) >= 300)
            return reject(
              new Error(`${target.label}: ${target.path} answered ${res.statusCode}: ${text.slice(0, 400)}`),
            )
          try {
            resolve(JSON.parse(text) as Record<string, unknown>)
          } catch (error) {
            reject(error)
          }
        })
      },
    )
    req.on('error', reject)
    req.end(body)
  })
}

/** The consumers of wrangler.toml with `max_batch_size` raised on the step queue. */
function withBatchSize(consumers: WorkerOptions['queueConsumers'], size: number): WorkerOptions['queueConsumers'] {
  if (!consumers || Array.isArray(consumers)) return consumers
  return Object.fromEntries(
    Object.entries(consumers).map(([queue, consumer]) => [
      queue,
      queue.endsWith('-steps') && typeof consumer === 'object' ? { ...consumer, maxBatchSize: size } : consumer,
    ]),
  )
}

/** The Durable Object binding of each class, as wrangler.toml declares them in every revision. */
const BINDINGS: Record<string, string> = {
  RunCoordinator: 'RUN_COORDINATOR',
  RubricInstance: 'RUBRIC_INSTANCE',
  LedgerShard: 'LEDGER',
  MemoryIndex: 'MEMORY_INDEX',
}

/**
 * Builds `bench/metered-worker.ts` against the tree at `root` (this checkout, or a worktree of another revision).
 * @example const built = await buildMetered(ROOT, '/tmp/metered'); await startBench(bundles, { …, workerScript:
 *   built.script })
 */
export async function buildMetered(
  root: string,
  outDir: string,
): Promise<{ script: string; workerOptions: WorkerOptions; migrationsDir: string }> {
  writeFileSync(join(root, 'bench/metered-worker.bench-copy.ts'), meteredEntryFor(root))
  const env = {
    ...process.env,
    WRANGLER_SEND_METRICS: 'false',
    CLOUDFLARE_CF_FETCH_ENABLED: 'false',
    NO_UPDATE_NOTIFIER: '1',
  }
  await run('npx', ['wrangler', 'deploy', '--dry-run', '--outdir', outDir, 'bench/metered-worker.bench-copy.ts'], {
    cwd: root,
    env,
  })
  rmSync(join(root, 'bench/metered-worker.bench-copy.ts'))
  const { workerOptions } = unstable_getMiniflareWorkerOptions(join(root, 'wrangler.toml'))
  return {
    script: join(outDir, 'metered-worker.bench-copy.js'),
    workerOptions: workerOptions as WorkerOptions,
    migrationsDir: join(root, 'migrations'),
  }
}

/**
 * Builds this tree's bundles and its metered Worker in a temporary directory, runs `work` with them, and removes the
 * directory afterwards (also on Ctrl-C).
 * @example await withMeteredBuild('rh-bench-step-', async (bundles, built) => { … })
 */
export async function withMeteredBuild<T>(
  prefix: string,
  work: (bundles: Bundles, built: Awaited<ReturnType<typeof buildMetered>>) => Promise<T>,
): Promise<T> {
  const tmp = mkdtempSync(join(tmpdir(), prefix))
  const forget = onInterrupt(() => rmSync(tmp, { recursive: true, force: true }))
  try {
    mkdirSync(join(tmp, 'build'))
    const bundles = await buildBundles(join(tmp, 'build'))
    return await work(bundles, await buildMetered(ROOT, join(tmp, 'metered')))
  } finally {
    forget()
    rmSync(tmp, { recursive: true, force: true })
  }
}

/** bench/metered-worker.ts with one metered export for each Durable Object class the tree at `root` exports. */
function meteredEntryFor(root: string): string {
  const template = readFileSync(join(ROOT, 'bench/metered-worker.ts'), 'utf8')
  const index = readFileSync(join(root, 'workers/index.ts'), 'utf8')
  const exported = [...index.matchAll(/export \{ (\w+) \} from '\.\.\/durable-objects\//g)].map((match) => match[1]!)
  const lines = exported.map((name) => `export const ${name} = metered(classes.${name}!, '${BINDINGS[name] ?? name}')`)
  // Entrypoints the Worker binds to itself (JUDGE), in trees that have them.
  for (const [, name] of index.matchAll(/export \{ (\w+Entrypoint) \} from '\.\/scoring\//g))
    lines.push(`export const ${name} = meteredEntrypoint(classes.${name}!, 'JUDGE')`)
  return template.replace(/\/\/ METERED-EXPORTS-START[\s\S]*\/\/ METERED-EXPORTS-END/, lines.join('\n'))
}
