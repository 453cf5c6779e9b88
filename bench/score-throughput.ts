/**
 * `npm run bench`: how close does POST /score come to the physical limit of the Workers runtime here?
 *
 * In one run: builds the Worker bundle (wrangler --dry-run, offline), serves it from Miniflare on 127.0.0.1
 * with its Durable Objects and D1, next to a bare Hono worker that only parses the same JSON body, then
 * loads both with autocannon from this process — every request a distinct rollout id and output text.
 * Measures req/s at 64 connections and latency at 1 connection for the bare handler, /score with a
 * zero-latency stub LLM (Miniflare outboundService) and /score on the default run's mock backend; and req/s at 64
 * connections of the floor Worker (bench/floor-worker.ts: the least a /score must do, one judge call to the same stub
 * and one Durable Object call), the baseline of the last line: /score with the stub LLM ÷ the floor.
 * The stub runs by default as a worker inside workerd (`--stub worker`); `--stub node` answers from a Node
 * function instead, which Miniflare serves over its loopback HTTP server: a socket hop into this busy process.
 *
 * Flags (or env): --duration s (BENCH_DURATION, 10), --warmup s (BENCH_WARMUP, 2), --connections n
 * (BENCH_CONNECTIONS, 64), --latency-duration s (BENCH_LATENCY_DURATION, = duration), --output-chars n
 * (BENCH_OUTPUT_CHARS, 1200), --stub worker|node (BENCH_STUB, worker), --storage memory|disk (BENCH_STORAGE,
 * memory: Durable Object and D1 SQLite files on /dev/shm; disk: the OS temp dir, Miniflare's default),
 * --idle-wait s (BENCH_IDLE_WAIT, 35: total time the run may spend waiting for workerd's background work —
 * analysis queue consumer, waitUntil — to finish between measurements), --out file (BENCH_OUT,
 * bench/results/score-throughput.json).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { dirname, join, relative } from 'node:path'
import { parseArgs } from 'node:util'
import {
  BARE_HOST,
  buildBundles,
  FLOOR_HOST,
  createRun,
  measure,
  nextScoreBody,
  ROOT,
  scoreOnce,
  startBench,
  STUB_GRADE,
  stubRunConfig,
  waitForIdle,
  onInterrupt,
  type BenchServer,
  type IdleBudget,
  type LoadTarget,
  type Measurement,
  type StorageKind,
  type StubKind,
} from './harness.ts'

const TARGETS = { ratio: 0.8, addedP50Ms: 2, addedP99Ms: 10 }
/** Other processes using this many cores or more during a measurement make it unreliable. */
const NOISY_CORES = 0.3
const STUB_RUN_ID = 'bench-stub'
const STUB_DESCRIPTIONS: Record<StubKind, string> = {
  worker: 'a worker inside workerd, as the outboundService',
  process: 'an HTTP server on loopback in a child Node process, fetched directly',
  node: 'a Node function in this process, as the outboundService',
}

export interface ThroughputOptions {
  durationS: number
  warmupS: number
  connections: number
  latencyDurationS: number
  outputChars: number
  stub: StubKind
  storage: StorageKind
  /** Total time the run may spend waiting for workerd's background work to finish between measurements. */
  idleWaitS: number
  out: string
}

/**
 * Reads the bench's flags, falling back to BENCH_* environment variables, then the defaults.
 * @example const options = readOptions(['--duration', '5'])
 */
export function readOptions(argv: string[]): ThroughputOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      duration: { type: 'string' },
      warmup: { type: 'string' },
      connections: { type: 'string' },
      'latency-duration': { type: 'string' },
      'output-chars': { type: 'string' },
      stub: { type: 'string' },
      storage: { type: 'string' },
      'idle-wait': { type: 'string' },
      out: { type: 'string' },
    },
  })
  const number = (flag: string | undefined, env: string, fallback: number) => {
    const value = Number(flag ?? process.env[env] ?? fallback)
    if (!Number.isFinite(value) || value < 0)
      throw new Error(`--${env.slice(6).toLowerCase().replace(/_/g, '-')} must be a non-negative number`)
    return value
  }
  const durationS = number(values.duration, 'BENCH_DURATION', 10)
  const stub = (values.stub ?? process.env.BENCH_STUB ?? 'worker') as StubKind
  if (stub !== 'node' && stub !== 'worker' && stub !== 'process')
    throw new Error('--stub must be worker, process or node')
  const storage = (values.storage ?? process.env.BENCH_STORAGE ?? 'memory') as StorageKind
  if (storage !== 'memory' && storage !== 'disk') throw new Error('--storage must be memory or disk')
  return {
    durationS,
    warmupS: number(values.warmup, 'BENCH_WARMUP', 2),
    connections: Math.max(1, Math.round(number(values.connections, 'BENCH_CONNECTIONS', 64))),
    latencyDurationS: number(values['latency-duration'], 'BENCH_LATENCY_DURATION', durationS),
    outputChars: Math.round(number(values['output-chars'], 'BENCH_OUTPUT_CHARS', 1200)),
    stub,
    storage,
    idleWaitS: number(values['idle-wait'], 'BENCH_IDLE_WAIT', 35),
    out: values.out ?? process.env.BENCH_OUT ?? join(ROOT, 'bench/results/score-throughput.json'),
  }
}

const f1 = (value: number) => (Number.isFinite(value) ? value.toFixed(1) : 'n/a')
const f2 = (value: number) => (Number.isFinite(value) ? value.toFixed(2) : 'n/a')
const pad = (text: string, width: number) => text.padStart(width)
const pass = (ok: boolean) => (ok ? 'PASS' : 'FAIL')

/**
 * Formats measurements as a fixed-width table, one row per target.
 * @example console.log(formatTable(throughputRows))
 */
export function formatTable(rows: readonly Measurement[]): string {
  const columns: [string, number, (row: Measurement) => string][] = [
    ['conns', 6, (row) => String(row.connections)],
    ['req/s', 9, (row) => f1(row.rps)],
    ['p50 ms', 9, (row) => f2(row.latency.p50)],
    ['p90 ms', 9, (row) => f2(row.latency.p90)],
    ['p99 ms', 9, (row) => f2(row.latency.p99)],
    ['2xx', 8, (row) => String(row.requests2xx)],
    ['non2xx', 8, (row) => String(row.non2xx)],
    ['errors', 8, (row) => String(row.errors + row.timeouts)],
    ['workerd cores', 15, (row) => f2(row.cpu.workerd)],
    ['cpu ms/req', 12, (row) => f2(row.workerdCpuMsPerRequest.window)],
    [
      'all-in ms/req',
      15,
      (row) => (row.workerdCpuMsPerRequest.allIn === null ? 'n/a' : f2(row.workerdCpuMsPerRequest.allIn)),
    ],
    ['node cores', 12, (row) => f2(row.cpu.node)],
    ['other cores', 13, (row) => f2(row.cpu.other)],
  ]
  const header = `${'target'.padEnd(34)}${columns.map(([name, width]) => pad(name, width)).join('')}`
  const lines = rows.map(
    (row) => `${row.label.padEnd(34)}${columns.map(([, width, cell]) => pad(cell(row), width)).join('')}`,
  )
  return [header, '-'.repeat(header.length), ...lines].join('\n')
}

/** One load phase's failures as the warning lists them. */
function describeFailures(row: Measurement): string {
  const statuses = JSON.stringify(row.statusCodes)
  return `${row.label} ${statuses} errors=${row.errors} ${JSON.stringify(row.errorKinds)} timeouts=${row.timeouts}`
}

async function main(): Promise<void> {
  const options = readOptions(process.argv.slice(2))
  const command = `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`
  const started = performance.now()
  const buildDir = mkdtempSync(join(tmpdir(), 'rh-bench-'))
  const forgetBuildDir = onInterrupt(() => rmSync(buildDir, { recursive: true, force: true }))
  const log = (message: string) =>
    console.log(`[${((performance.now() - started) / 1_000).toFixed(1).padStart(5)} s] ${message}`)

  let server: BenchServer | undefined
  try {
    log(`building the Worker, the bare reference worker and the floor Worker into ${buildDir}`)
    const bundles = await buildBundles(buildDir, { floor: true })
    log(
      `built in ${(bundles.buildMs / 1_000).toFixed(1)} s; starting Miniflare (stub LLM: ` +
        `${STUB_DESCRIPTIONS[options.stub]})`,
    )
    server = await startBench(bundles, { stub: options.stub, storage: options.storage })
    const url = server.url
    const token = await createRun(server, STUB_RUN_ID, stubRunConfig(server.stubBaseUrl))
    const targets = {
      bare: { label: 'bare Hono handler', path: '/score', headers: { host: BARE_HOST }, prefix: 'bare' },
      stub: {
        label: '/score, stub LLM (openai backend)',
        path: `/runs/${STUB_RUN_ID}/score`,
        headers: { authorization: `Bearer ${token}` },
        prefix: 'stub',
      },
      mock: { label: '/score, default run, mock backend', path: '/score', prefix: 'mock' },
      floor: {
        label: 'floor: 1 DO call + 1 judge call',
        path: '/score',
        headers: { host: FLOOR_HOST },
        prefix: 'floor',
      },
    } satisfies Record<string, LoadTarget>

    // Sanity: each target answers, the stub run really goes through the stub LLM, nothing comes from a cache.
    const callsBefore = await server.stubCalls()
    const stubCheck = await scoreOnce(server.url, targets.stub, options.outputChars)
    const criteria = stubCheck.criteria as { grade: number }[]
    if (stubCheck.cached !== false || stubCheck.duplicate !== false || !criteria.every((c) => c.grade === STUB_GRADE)) {
      throw new Error(`the stub run did not score through the stub LLM: ${JSON.stringify(stubCheck)}`)
    }
    if (options.stub !== 'worker' && (await server.stubCalls()) !== callsBefore + 1)
      throw new Error('the stub LLM was not called exactly once for a fresh rollout')
    const mockCheck = await scoreOnce(server.url, targets.mock, options.outputChars)
    if (mockCheck.cached !== false || mockCheck.duplicate !== false)
      throw new Error(`the mock run answered from a cache: ${JSON.stringify(mockCheck)}`)
    await scoreOnce(server.url, targets.bare, options.outputChars)
    const floorCheck = await scoreOnce(server.url, targets.floor, options.outputChars)
    const floorCriteria = floorCheck.criteria as { grade: number }[]
    if (floorCheck.duplicate !== false || !floorCriteria.length || !floorCriteria.every((c) => c.grade === STUB_GRADE))
      throw new Error(`the floor Worker did not score through the stub LLM: ${JSON.stringify(floorCheck)}`)
    log(`Miniflare at ${server.url}; sanity checks passed`)

    const budget: IdleBudget = { remainingS: options.idleWaitS }
    // Throughput rows settle and drain background work (for the all-in CPU figure); latency rows only start idle.
    const load = async (target: LoadTarget, connections: number, durationS: number) => {
      // Waits for workerd's own leftover work only: busy neighbours cannot be waited out, they are reported.
      const idle =
        budget.remainingS > 0
          ? await waitForIdle(Math.min(5, budget.remainingS), Number.POSITIVE_INFINITY)
          : { others: 0, workerd: 0, waitedS: 0 }
      budget.remainingS -= idle.waitedS
      const notes = [
        idle.waitedS >= 1 ? `waited ${idle.waitedS.toFixed(1)} s for idle` : '',
        idle.workerd >= 0.05 ? `workerd still busy with earlier background work: ${idle.workerd.toFixed(2)} cores` : '',
        idle.others >= NOISY_CORES ? `other processes busy: ${idle.others.toFixed(2)} cores` : '',
      ].filter(Boolean)
      log(
        `${target.label}: ${connections} connection(s), warm-up ${options.warmupS} s + ${durationS} ` +
          `s${notes.length ? ` (${notes.join('; ')})` : ''}`,
      )
      return measure(url, target, {
        connections,
        durationS,
        warmupS: options.warmupS,
        outputChars: options.outputChars,
        idleCapS: connections > 1 ? 10 : 0,
        budget,
      })
    }
    const stubCallsAtStart = await server.stubCalls()
    // Latency first: at 1 connection the background work keeps up, so nothing is left over from saturation.
    const latency: Measurement[] = []
    for (const target of [targets.bare, targets.stub, targets.mock])
      latency.push(await load(target, 1, options.latencyDurationS))
    // The floor before the /score rows: they leave background work (ledger reports, analyses) behind, it leaves none.
    const throughput: Measurement[] = []
    let floorCalls = 0
    for (const target of [targets.bare, targets.floor, targets.stub, targets.mock]) {
      const callsBefore = await server.stubCalls()
      throughput.push(await load(target, options.connections, options.durationS))
      if (target === targets.floor) floorCalls = (await server.stubCalls()) - callsBefore
    }
    const stubCalls = (await server.stubCalls()) - stubCallsAtStart - floorCalls

    // The ledger shards hand the scorer's calls to the run's coordinator within a second: one per /score means no cache
    // hits.
    await new Promise((resolve) => setTimeout(resolve, 2_000))
    const summed = (
      (await (
        await fetch(`${server.url}/runs/${STUB_RUN_ID}/llm_calls`, { headers: { authorization: `Bearer ${token}` } })
      ).json()) as { calls: { role: string; calls: number }[] }
    ).calls
    const scorerCalls = summed.filter((group) => group.role === 'scorer').reduce((sum, group) => sum + group.calls, 0)

    const [bareT, floorT, stubT, mockT] = throughput as [Measurement, Measurement, Measurement, Measurement]
    const [bareL, stubL, mockL] = latency as [Measurement, Measurement, Measurement]
    const ratio = {
      stub: stubT.rps / bareT.rps,
      mock: mockT.rps / bareT.rps,
      floor: stubT.rps / floorT.rps,
      // The same ratio read from workerd's side, CPU per request: steadier when neighbours take cores.
      floorCpu: floorT.workerdCpuMsPerRequest.window / stubT.workerdCpuMsPerRequest.window,
    }
    const added = {
      stub: { p50: stubL.latency.p50 - bareL.latency.p50, p99: stubL.latency.p99 - bareL.latency.p99 },
      mock: { p50: mockL.latency.p50 - bareL.latency.p50, p99: mockL.latency.p99 - bareL.latency.p99 },
    }
    const runS = (performance.now() - started) / 1_000
    const failed = [...throughput, ...latency].filter((row) => row.non2xx + row.errors + row.timeouts > 0)

    console.log(`\n$ ${command}`)
    console.log(
      `node ${process.version}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}; Miniflare + workerd on 127.0.0.1, ` +
        `autocannon in the same Node process`,
    )
    console.log(
      `bodies ≈ ${Buffer.byteLength(nextScoreBody('size', options.outputChars))} B, each with a distinct rollout id ` +
        `and output text; stub LLM: ${options.stub}; DO/D1 storage: ${options.storage}\n`,
    )
    console.log(
      `Throughput (${options.connections} connections, ${options.durationS} s each after ${options.warmupS} s ` +
        `warm-up):`,
    )
    console.log(formatTable(throughput))
    console.log(`\nLatency (1 connection, ${options.latencyDurationS} s each):`)
    console.log(formatTable(latency))
    console.log(
      '\ncores = CPU seconds per second during the window; cpu ms/req = workerd CPU in the window per 2xx response;',
    )
    console.log(
      'all-in ms/req adds the background work the window left behind (ledger reports, step updates), drained after it.',
    )
    console.log(`\n${'figure'.padEnd(44)}${pad('stub LLM', 10)}${pad('mock', 10)}${pad('target', 10)}`)
    console.log(
      `${'throughput ratio /score ÷ bare'.padEnd(44)}${pad(f2(ratio.stub), 10)}${pad(f2(ratio.mock), 10)}` +
        `${pad(`≥ ${TARGETS.ratio}`, 10)}  ${pass(ratio.stub >= TARGETS.ratio)} / ${pass(ratio.mock >= TARGETS.ratio)}`,
    )
    console.log(
      `${'added latency p50 over bare (ms)'.padEnd(44)}${pad(f2(added.stub.p50), 10)}${pad(f2(added.mock.p50), 10)}` +
        `${pad(`≤ ${TARGETS.addedP50Ms}`, 10)}  ${pass(added.stub.p50 <= TARGETS.addedP50Ms)} / ` +
        `${pass(added.mock.p50 <= TARGETS.addedP50Ms)}`,
    )
    console.log(
      `${'added latency p99 over bare (ms)'.padEnd(44)}${pad(f2(added.stub.p99), 10)}${pad(f2(added.mock.p99), 10)}` +
        `${pad(`≤ ${TARGETS.addedP99Ms}`, 10)}  ${pass(added.stub.p99 <= TARGETS.addedP99Ms)} / ` +
        `${pass(added.mock.p99 <= TARGETS.addedP99Ms)}`,
    )
    console.log('\nWhat one /score costs (Durable Object requests, rows written, dollars): npm run bench:cost')
    const stubNote =
      options.stub === 'worker' ? '' : ` (the ${options.stub} stub answered ${stubCalls} during the load phases)`
    console.log(`stub LLM scorer calls the run counted: ${scorerCalls}${stubNote}`)
    const noisy = [...throughput, ...latency].filter((row) => row.cpu.other >= NOISY_CORES)
    if (noisy.length)
      console.log(
        `WARNING: other processes used ≥ ${NOISY_CORES} cores during: ` +
          `${noisy.map((row) => `${row.label} @${row.connections}c (${f2(row.cpu.other)})`).join('; ')} — rerun on a ` +
          `quiet machine for reliable figures`,
      )
    if (failed.length) console.log(`WARNING: non-2xx or errors in: ${failed.map(describeFailures).join('; ')}`)
    console.log(`\nrun time ${runS.toFixed(1)} s; JSON: ${relative(process.cwd(), options.out)}`)
    const [floorCpu, stubCpu] = [floorT.workerdCpuMsPerRequest.window, stubT.workerdCpuMsPerRequest.window]
    console.log(
      `/score (stub LLM) ÷ floor Worker (1 DO call + 1 judge call), ${options.connections} connections: ` +
        `${f1(stubT.rps)} ÷ ${f1(floorT.rps)} req/s = ${f2(ratio.floor)} (workerd CPU per request, floor ÷ /score: ` +
        `${f2(floorCpu)} ÷ ${f2(stubCpu)} ms = ${f2(ratio.floorCpu)})`,
    )

    mkdirSync(dirname(options.out), { recursive: true })
    writeFileSync(
      options.out,
      `${JSON.stringify(
        {
          command,
          at: new Date().toISOString(),
          machine: { node: process.version, cpus: cpus().length, cpu_model: cpus()[0]?.model ?? null },
          options,
          throughput,
          latency,
          ratio,
          added_latency_ms: added,
          targets: TARGETS,
          pass: {
            ratio_stub: ratio.stub >= TARGETS.ratio,
            ratio_mock: ratio.mock >= TARGETS.ratio,
            added_p50_stub: added.stub.p50 <= TARGETS.addedP50Ms,
            added_p99_stub: added.stub.p99 <= TARGETS.addedP99Ms,
            added_p50_mock: added.mock.p50 <= TARGETS.addedP50Ms,
            added_p99_mock: added.mock.p99 <= TARGETS.addedP99Ms,
          },
          stub_llm_calls: {
            counted_by_run: scorerCalls,
            answered_by_stub: options.stub !== 'worker' ? stubCalls : null,
          },
          run_s: runS,
        },
        null,
        2,
      )}\n`,
    )
    if (failed.length) process.exitCode = 1
  } finally {
    await server?.dispose()
    rmSync(buildDir, { recursive: true, force: true })
    forgetBuildDir()
  }
}

main().catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
