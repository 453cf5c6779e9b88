/**
 * `npm run bench:rm [-- --duration 10 --soak 30 --judge-latency-ms 20 --concurrency 1,8,64 --batch 16]`
 *
 * How close `/rm/<target>/score` and `batch_score` come to the floor, in one run on this machine:
 *   - the judge: bench/loopback-llm-stub.ts in its own Node process on 127.0.0.1, every answer delayed by
 *     `--judge-latency-ms`, grading each criterion it is shown;
 *   - `/rm`: `npm start`'s server (wrangler dev, local D1), with an artifact from `search --backend mock
 *     --num-votes 1` → `export` → `deploy --llm-base-url <the stub> --llm-model stub-judge`, all through the CLI;
 *   - the floor: bench/rm-floor-worker.ts under `wrangler dev` — parse the body, one judge call per candidate, answer.
 * Every request is the body autosr's verl `RMScoringClient` sends, with a new candidate each time (nothing memoised),
 * at each concurrency for `--duration` seconds after a `--warmup`; then `--soak` seconds of 64 concurrent
 * `batch_score` of `--batch` to show nothing is lost. Printed per cell: req/s, candidates/s, p50/p99, judge calls
 * per candidate, errors (non-2xx, failed items, dropped connections), the server's CPU seconds (its whole process
 * tree), and the ratio to the floor; then the soak again on `npm run serve` (the same Worker and state on Miniflare
 * alone, without wrangler dev's ProxyWorker). Results also go to bench/results/rm.json.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { Agent, request as httpRequest } from 'node:http'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { parseArgs } from 'node:util'
import WebSocket from 'ws'
import { ensureAdminToken, freePort, WRANGLER_ENV } from '../offline/dev/start.ts'
import { cpuSecondsOf, onInterrupt, percentile, ROOT, startLoopbackStub } from './harness.ts'

const TARGET = 'bench-rm'
const TARGETS = { scoreRatio: 0.9, addedP50Ms: 3 }

function readOptions() {
  const { values } = parseArgs({
    options: {
      duration: { type: 'string', default: '10' },
      warmup: { type: 'string', default: '2' },
      soak: { type: 'string', default: '30' },
      'judge-latency-ms': { type: 'string', default: '20' },
      concurrency: { type: 'string', default: '1,8,64' },
      batch: { type: 'string', default: '16' },
      'candidate-chars': { type: 'string', default: '800' },
      out: { type: 'string', default: join(ROOT, 'bench/results/rm.json') },
      profile: { type: 'string' },
      'judge-port': { type: 'string' },
      peer: { type: 'string' },
      'peer-pid': { type: 'string' },
    },
  })
  return {
    durationS: Number(values.duration),
    warmupS: Number(values.warmup),
    soakS: Number(values.soak),
    judgeLatencyMs: Number(values['judge-latency-ms']),
    concurrencies: values.concurrency.split(',').map(Number),
    batch: Number(values.batch),
    candidateChars: Number(values['candidate-chars']),
    out: values.out,
    /** Write a CPU profile of the Worker under /rm score load (c=8) to this file instead of measuring cells. */
    profile: values.profile,
    /** The stub's port (else any free one), so a peer server can be pointed at the judge before the run. */
    judgePort: values['judge-port'],
    /** Another RM server with the same routes at its root (autosr's), measured cell by cell beside /rm. */
    peer: values.peer,
    peerPid: values['peer-pid'] ? Number(values['peer-pid']) : undefined,
  }
}
type Options = ReturnType<typeof readOptions>

/** A server this bench started: its URL, the pids of its whole process tree, and how to stop it. */
interface Served {
  url: string
  pids: () => number[]
  stop: () => void
  /** Settles once the server's process has exited. */
  exited: Promise<unknown>
}

/** Every descendant of `root` (and itself), from /proc. */
function processTree(root: number): number[] {
  const parents = new Map<number, number>()
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      parents.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]))
    } catch {
      // the process ended while being read
    }
  }
  const tree = [root]
  for (let i = 0; i < tree.length; i++)
    for (const [pid, parent] of parents) if (parent === tree[i] && !tree.includes(pid)) tree.push(pid)
  return tree.filter((pid) => parents.has(pid))
}

/** Stops a server and waits until every process of its tree has exited (they hold the local state's files). */
async function stopAndWait(server: Served): Promise<void> {
  const pids = server.pids()
  server.stop()
  await server.exited
  while (pids.some((pid) => existsSync(`/proc/${pid}`))) await new Promise((resolve) => setTimeout(resolve, 100))
}

/** Starts a server in its own process group and waits until `ready` answers (any status). */
async function serve(label: string, command: string, args: string[], port: number, ready: string): Promise<Served> {
  const child: ChildProcess = spawn(command, args, {
    cwd: ROOT,
    env: { ...WRANGLER_ENV, NO_COLOR: '1', PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  })
  let logs = ''
  const logFile = process.env.BENCH_RM_LOGS ? `${process.env.BENCH_RM_LOGS}.${port}.log` : undefined
  const keep = (chunk: Buffer) => {
    logs = (logs + chunk.toString('utf8')).slice(-20_000)
    if (logFile) appendFileSync(logFile, chunk)
  }
  child.stdout!.on('data', keep)
  child.stderr!.on('data', keep)
  const stop = () => {
    try {
      process.kill(-child.pid!, 'SIGTERM')
    } catch {
      // already gone
    }
  }
  const forget = onInterrupt(stop)
  const url = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 120_000
  while (
    !(await fetch(`${url}${ready}`).then(
      () => true,
      () => false,
    ))
  ) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`${label} did not start:\n${logs}`)
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  const exited = new Promise((resolve) => (child.exitCode === null ? child.once('exit', resolve) : resolve(null)))
  return {
    url,
    pids: () => processTree(child.pid!),
    stop: () => {
      forget()
      stop()
    },
    exited,
  }
}

/** `reward-harness <args>`, as a user runs it; throws with its output on a non-zero exit. */
function cli(args: string[], env: Record<string, string> = {}): string {
  const run = spawnSync(process.execPath, [join(ROOT, 'reward-harness'), ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env, NO_COLOR: '1' },
    encoding: 'utf8',
  })
  if (run.status !== 0) throw new Error(`reward-harness ${args[0]} exited ${run.status}:\n${run.stderr}${run.stdout}`)
  return run.stdout
}

/** Searches the demo dataset on the mock with one vote and exports the artifact; returns its file. */
function searchAndExport(work: string): string {
  const searched = join(work, 'best.json')
  const artifact = join(work, 'rm.json')
  cli(['search', '--dataset', 'examples/demo.json', '--backend', 'mock', '--num-votes', '1', '--output', searched])
  cli(['export', '--search-output', searched, '--out', artifact])
  return artifact
}

/** Deploys the artifact file to `url`'s bench target, to be judged by the stub; returns the artifact id. */
function deployTo(url: string, adminToken: string, artifact: string, judgeUrl: string): string {
  cli(
    ['deploy', '--artifact', artifact, '--target', TARGET, '--url', url].concat([
      '--llm-base-url',
      judgeUrl,
      '--llm-model',
      'stub-judge',
    ]),
    { REWARD_HARNESS_ADMIN_TOKEN: adminToken, USER: 'bench' },
  )
  return (JSON.parse(readFileSync(artifact, 'utf8')) as { artifact_id: string }).artifact_id
}

/** The demo prompts the verl client would send, by prompt id. */
const demoPrompts = (
  JSON.parse(readFileSync(join(ROOT, 'examples/demo.json'), 'utf8')) as {
    prompts: { prompt_id: string; prompt: string }[]
  }
).prompts

let candidateSerial = 0

/** One verl `RMScoringClient` item with a candidate never sent before. */
function nextItem(chars: number): object {
  const serial = ++candidateSerial
  const { prompt_id, prompt } = demoPrompts[serial % demoPrompts.length]!
  const text = `Candidate ${serial}: ${'A careful answer that works through the question step by step. '.repeat(
    Math.ceil(chars / 64),
  )}`.slice(0, chars)
  return { prompt_id, prompt, candidate: { candidate_id: `c${serial}`, text, source: 'verl', metadata: {} } }
}

/** What one cell's load saw. */
interface Load {
  requests: number
  ok: number
  candidates: number
  failedItems: number
  statuses: Record<string, number>
  dropped: number
  /** The first answer (or connection error) of each kind that was not a 200, shortened. */
  samples: Record<string, string>
  latencies: number[]
  wallS: number
}

/** One POST over a keep-alive agent; resolves with the status and body, or rejects on a dropped connection. */
function post(agent: Agent, url: string, body: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        let text = ''
        res.setEncoding('utf8')
        res.on('data', (chunk: string) => void (text += chunk))
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }))
        res.on('error', reject)
      },
    )
    req.setTimeout(120_000, () => req.destroy(new Error('timeout')))
    req.on('error', reject)
    req.end(body)
  })
}

/** Drives `url` with `concurrency` clients, each sending its next request when the last answered, for `seconds`. */
async function drive(url: string, concurrency: number, seconds: number, batch: number | null, chars: number) {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency })
  const load: Load = {
    requests: 0,
    ok: 0,
    candidates: 0,
    failedItems: 0,
    statuses: {},
    dropped: 0,
    samples: {},
    latencies: [],
    wallS: 0,
  }
  const started = performance.now()
  const deadline = started + seconds * 1_000
  const client = async () => {
    while (performance.now() < deadline) {
      const items = batch === null ? [nextItem(chars)] : Array.from({ length: batch }, () => nextItem(chars))
      const body = JSON.stringify(batch === null ? items[0] : { items })
      const sent = performance.now()
      load.requests++
      load.candidates += items.length
      try {
        const { status, text } = await post(agent, url, body)
        load.statuses[status] = (load.statuses[status] ?? 0) + 1
        if (status !== 200) {
          load.samples[status] ??= text.slice(0, 300)
          continue
        }
        const failed =
          batch === null ? 0 : (JSON.parse(text) as { results: { ok: boolean }[] }).results.filter((r) => !r.ok).length
        load.failedItems += failed
        if (failed === 0) load.ok++
        load.latencies.push(performance.now() - sent)
      } catch (error) {
        load.dropped++
        load.samples.dropped ??= String(error)
      }
    }
  }
  await Promise.all(Array.from({ length: concurrency }, client))
  load.wallS = (performance.now() - started) / 1_000
  agent.destroy()
  load.latencies.sort((a, b) => a - b)
  return load
}

/**
 * The judge's own latency as a client on this machine sees it: one judge call at a time straight to the stub,
 * the body a verifier call carries; the p50 of `seconds` of them.
 */
async function judgeAlone(judgeUrl: string, seconds: number, chars: number): Promise<number> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  const latencies: number[] = []
  const deadline = performance.now() + seconds * 1_000
  while (performance.now() < deadline) {
    const item = nextItem(chars) as { prompt: string; candidate: { text: string } }
    const body = JSON.stringify({
      model: 'stub-judge',
      messages: [
        { role: 'user', content: `- quality (weight 1.000): correct.\n${item.prompt}\n${item.candidate.text}` },
      ],
    })
    const sent = performance.now()
    await post(agent, `${judgeUrl}/chat/completions`, body)
    latencies.push(performance.now() - sent)
  }
  agent.destroy()
  return percentile(
    latencies.sort((a, b) => a - b),
    50,
  )
}

/** One measured cell: the load and what it cost the server and the judge. */
interface Cell {
  label: string
  concurrency: number
  batch: number | null
  /** Requests answered 200 with every candidate scored. */
  answered: number
  rps: number
  candidatesPerS: number
  p50: number
  p99: number
  judgeCallsPerCandidate: number
  /** Mean request bytes of a judge call: the judge's work per call, to be alike on both sides. */
  judgeBytesPerCall: number
  /** CPU seconds the judge stub spent (a single Node process: at high load it may be what limits both sides). */
  judgeCpuS: number
  errors: number
  lost: number
  statuses: Record<string, number>
  /** What each kind of error said, first seen. */
  errorSamples: Record<string, string>
  serverCpuS: number
}

/** The loopback judge: its counters and its process. */
type Judge = Awaited<ReturnType<typeof startLoopbackStub>>

async function judgeCount(judge: Judge): Promise<{ calls: number; bytes: number }> {
  return { calls: await judge.calls(), bytes: await judge.bytes() }
}

async function measure(
  label: string,
  server: Served,
  judge: Judge,
  cell: { path: string; concurrency: number; batch: number | null; seconds: number; warmupS: number; chars: number },
): Promise<Cell> {
  const url = `${server.url}${cell.path}`
  if (cell.warmupS > 0) await drive(url, cell.concurrency, cell.warmupS, cell.batch, cell.chars)
  const pids = server.pids()
  const before = { cpu: cpuSecondsOf(pids), judgeCpu: cpuSecondsOf([judge.pid]), ...(await judgeCount(judge)) }
  const load = await drive(url, cell.concurrency, cell.seconds, cell.batch, cell.chars)
  const after = { cpu: cpuSecondsOf(pids), judgeCpu: cpuSecondsOf([judge.pid]), ...(await judgeCount(judge)) }
  const calls = after.calls - before.calls
  const non2xx = Object.entries(load.statuses).reduce((sum, [status, n]) => sum + (status === '200' ? 0 : n), 0)
  const perRequest = cell.batch ?? 1
  return {
    label,
    concurrency: cell.concurrency,
    batch: cell.batch,
    answered: load.ok,
    rps: load.ok / load.wallS,
    candidatesPerS: (load.ok * perRequest) / load.wallS,
    p50: percentile(load.latencies, 50),
    p99: percentile(load.latencies, 99),
    judgeCallsPerCandidate: calls / Math.max(1, load.candidates),
    judgeBytesPerCall: (after.bytes - before.bytes) / Math.max(1, calls),
    judgeCpuS: after.judgeCpu - before.judgeCpu,
    errors: non2xx + load.dropped + load.failedItems,
    lost: (non2xx + load.dropped) * perRequest + load.failedItems,
    statuses: load.statuses,
    errorSamples: load.samples,
    serverCpuS: after.cpu - before.cpu,
  }
}

const fixed = (value: number, digits = 1) => (Number.isFinite(value) ? value.toFixed(digits) : 'n/a')

const cellName = (cell: Cell) =>
  `${cell.batch === null ? 'score' : `batch_score of ${cell.batch}`}, c=${cell.concurrency}`

const side = (cell: Cell) =>
  `${fixed(cell.rps)} req/s, ${fixed(cell.candidatesPerS)} cand/s, p50 ${fixed(cell.p50)} ms, ` +
  `p99 ${fixed(cell.p99)} ms, ${fixed(cell.judgeCallsPerCandidate, 2)} judge calls/cand, ` +
  `${cell.errors} errors${cell.errors ? ` ${JSON.stringify(cell.errorSamples)}` : ''}, ` +
  `server CPU ${fixed(cell.serverCpuS)} s, judge ${fixed(cell.judgeBytesPerCall, 0)} B/call ` +
  `${fixed(cell.judgeCpuS)} CPU s`

function row(floor: Cell, rm: Cell): string {
  const ratio = fixed(rm.rps / floor.rps, 2)
  return `${cellName(rm)}\n  floor: ${side(floor)}\n  /rm:   ${side(rm)}\n  ratio to floor: ${ratio}`
}

async function main() {
  const options: Options = readOptions()
  const work = mkdtempSync(join(tmpdir(), 'bench-rm-'))
  const forgetWork = onInterrupt(() => rmSync(work, { recursive: true, force: true }))
  const stub = await startLoopbackStub({
    STUB_LATENCY_MS: String(options.judgeLatencyMs),
    STUB_REPLY: 'verifier',
    ...(options.judgePort ? { STUB_PORT: options.judgePort } : {}),
  })
  const rmPort = await freePort()
  const inspectorPort = await freePort()
  const rm = await serve(
    'npm start',
    'npx',
    ['tsx', 'offline/dev/start.ts', '--inspector-port', String(inspectorPort)],
    rmPort,
    '/healthz',
  )
  let floor: Served | undefined
  try {
    const artifact = searchAndExport(work)
    const artifactId = deployTo(rm.url, ensureAdminToken(join(ROOT, '.dev.vars')).token, artifact, stub.baseUrl)
    // One /rm score first: the size of its judge request is what the floor's judge call is padded to.
    const calibration = await judgeCount(stub)
    const agent = new Agent({ keepAlive: false })
    await post(agent, `${rm.url}/rm/${TARGET}/score`, JSON.stringify(nextItem(options.candidateChars)))
    const judgeBytes = Math.round((await judgeCount(stub)).bytes - calibration.bytes)
    floor = await serveFloor(stub.baseUrl, judgeBytes)
    console.log(
      `bench:rm — judge stub ${options.judgeLatencyMs} ms per call; artifact ${artifactId.slice(0, 15)}… on ` +
        `/rm/${TARGET} (npm start on ${rm.url}); floor Worker on ${floor.url}, its judge request padded to ` +
        `${judgeBytes} bytes as /rm's; ${options.durationS} s per cell after ${options.warmupS} s of warm-up\n`,
    )
    if (options.profile) return await profileRm(rm, inspectorPort, options)
    const judgeP50 = await judgeAlone(stub.baseUrl, options.durationS, options.candidateChars)
    console.log(`judge alone (straight to the stub, one at a time): p50 ${fixed(judgeP50)} ms\n`)
    const cells = await measureCells(floor, rm, stub, options)
    const peerCells = options.peer ? await measurePeer(options.peer, options.peerPid, cells, stub, options) : []
    const soakCell = {
      path: `/rm/${TARGET}/batch_score`,
      concurrency: 64,
      batch: options.batch,
      seconds: options.soakS,
    }
    const soakOptions = { ...soakCell, warmupS: 0, chars: options.candidateChars }
    const soak = await measure('/rm soak', rm, stub, soakOptions)
    console.log(soakLine('npm start (wrangler dev)', soak, options))
    // The same soak on `npm run serve`: the same Worker and state on Miniflare alone, no wrangler dev ProxyWorker.
    await stopAndWait(rm)
    const served = await serve('npm run serve', 'npx', ['tsx', 'offline/dev/serve.ts'], rmPort, '/healthz')
    let control: Cell
    const servedCells: Cell[] = []
    try {
      control = await measure('/rm soak, npm run serve', served, stub, soakOptions)
      console.log(soakLine('npm run serve (Miniflare alone)', control, options))
      // Every cell again on npm run serve: /rm without the dev proxy, for a server on one machine.
      for (const { rm: cell } of cells) {
        const again = { ...cell, path: `/rm/${TARGET}/${cell.batch === null ? 'score' : 'batch_score'}` }
        const withTimes = {
          ...again,
          seconds: options.durationS,
          warmupS: options.warmupS,
          chars: options.candidateChars,
        }
        const measured = await measure('/rm on npm run serve', served, stub, withTimes)
        servedCells.push(measured)
        console.log(`npm run serve, ${cellName(measured)}: ${side(measured)}`)
      }
    } finally {
      served.stop()
    }
    report(cells, soak, judgeP50)
    mkdirSync(dirname(options.out), { recursive: true })
    const results = { options, artifactId, judgeP50, cells, soak, control, servedCells, peerCells }
    writeFileSync(options.out, `${JSON.stringify(results, null, 2)}\n`)
    console.log(`\nwritten: ${options.out}`)
  } finally {
    rm.stop()
    floor?.stop()
    stub.stop()
    forgetWork()
    rmSync(work, { recursive: true, force: true })
  }
}

/** Every cell, score then batch_score, at each concurrency: the floor, then /rm, each printed as it ends. */
async function measureCells(floor: Served, rm: Served, stub: Judge, options: Options) {
  const cells: { floor: Cell; rm: Cell }[] = []
  for (const batch of [null, options.batch]) {
    for (const concurrency of options.concurrencies) {
      const path = `/rm/${TARGET}/${batch === null ? 'score' : 'batch_score'}`
      const cell = { path, concurrency, batch, seconds: options.durationS, warmupS: options.warmupS }
      const withChars = { ...cell, chars: options.candidateChars }
      const pair = {
        floor: await measure('floor', floor, stub, withChars),
        rm: await measure('/rm', rm, stub, withChars),
      }
      cells.push(pair)
      console.log(row(pair.floor, pair.rm))
    }
  }
  return cells
}

/** Every cell again against the peer server (`/score`, `/batch_score` at its root), printed beside /rm's. */
async function measurePeer(url: string, pid: number | undefined, cells: { rm: Cell }[], stub: Judge, options: Options) {
  const peer: Served = {
    url,
    pids: () => (pid ? processTree(pid) : []),
    stop: () => undefined,
    exited: Promise.resolve(),
  }
  const measured: Cell[] = []
  for (const { rm } of cells) {
    const path = rm.batch === null ? '/score' : '/batch_score'
    const cell = { path, concurrency: rm.concurrency, batch: rm.batch, seconds: options.durationS }
    const result = await measure('peer', peer, stub, {
      ...cell,
      warmupS: options.warmupS,
      chars: options.candidateChars,
    })
    measured.push(result)
    console.log(`peer, ${cellName(result)}: ${side(result)}\n  /rm ÷ peer: ${fixed(rm.rps / result.rps, 2)}`)
  }
  return measured
}

/** The floor Worker under wrangler dev, its judge request padded to `judgeBytes`. */
async function serveFloor(judgeUrl: string, judgeBytes: number): Promise<Served> {
  const port = await freePort()
  const args = ['wrangler', 'dev', '--config', 'bench/rm-floor.wrangler.toml', '--ip', '127.0.0.1']
  const vars = ['--var', `JUDGE_URL:${judgeUrl}`, '--var', `JUDGE_REQUEST_BYTES:${judgeBytes}`]
  return serve('the floor Worker', 'npx', [...args, '--port', String(port), '--local', ...vars], port, '/')
}

/** One soak's line: batches answered, candidates per second, what was lost and what the errors said. */
function soakLine(where: string, soak: Cell, options: Options): string {
  return (
    `soak on ${where}: 64 concurrent batch_score of ${options.batch} for ${options.soakS} s: ` +
    `${soak.answered} batches answered, ${fixed(soak.candidatesPerS)} cand/s, ` +
    `${soak.errors} errors, ${soak.lost} candidates lost, statuses ${JSON.stringify(soak.statuses)}` +
    (soak.errors ? ` ${JSON.stringify(soak.errorSamples)}` : '')
  )
}

/** The targets of issue 22, each with the figure that meets or misses it. */
function report(cells: { floor: Cell; rm: Cell }[], soak: Cell, judgeP50: number): void {
  const scores = cells.filter(({ rm }) => rm.batch === null)
  const worstRatio = Math.min(...scores.map(({ floor, rm }) => rm.rps / floor.rps))
  const single = scores.find(({ rm }) => rm.concurrency === 1)
  const added = single ? single.rm.p50 - judgeP50 : Number.NaN
  const floorAdded = single ? single.floor.p50 - judgeP50 : Number.NaN
  const errors = cells.reduce((sum, { rm }) => sum + rm.errors, 0)
  const verdict = (ok: boolean) => (ok ? 'met' : 'MISSED')
  console.log(
    `\ntargets:\n` +
      `  score ≥ ${TARGETS.scoreRatio}× floor at every concurrency: worst ${fixed(worstRatio, 2)} — ` +
      `${verdict(worstRatio >= TARGETS.scoreRatio)}\n` +
      `  p50 at concurrency 1 within ${TARGETS.addedP50Ms} ms of the judge alone: +${fixed(added)} ms — ` +
      `${verdict(added <= TARGETS.addedP50Ms)} (the floor Worker: +${fixed(floorAdded)} ms; /rm over the floor: ` +
      `${fixed(added - floorAdded)} ms)\n` +
      `  0 errors: ${errors} — ${verdict(errors === 0)}\n` +
      `  soak, nothing lost: ${soak.lost} lost — ${verdict(soak.lost === 0)}`,
  )
}

/**
 * Profiles the Worker's CPU through wrangler dev's inspector while /rm score runs at concurrency 8, writes the
 * `.cpuprofile` (open it in Chrome DevTools) and prints the functions with the most self time.
 */
async function profileRm(server: Served, inspectorPort: number, options: Options): Promise<void> {
  const targets = (await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json()) as {
    webSocketDebuggerUrl: string
  }[]
  if (!targets[0]) throw new Error(`no inspector target on :${inspectorPort}`)
  const socket = new WebSocket(targets[0].webSocketDebuggerUrl)
  await new Promise((resolve, reject) => {
    socket.on('open', () => resolve(undefined))
    socket.on('error', reject)
  })
  let nextId = 0
  const pending = new Map<number, (result: unknown) => void>()
  socket.on('message', (data) => {
    const message = JSON.parse(data.toString('utf8')) as { id?: number; result?: unknown }
    if (message.id !== undefined) pending.get(message.id)?.(message.result)
  })
  const send = (method: string, params: object = {}) =>
    new Promise<unknown>((resolve) => {
      const id = ++nextId
      pending.set(id, resolve)
      socket.send(JSON.stringify({ id, method, params }))
    })
  const url = `${server.url}/rm/${TARGET}/score`
  await drive(url, 8, options.warmupS, null, options.candidateChars)
  await send('Profiler.enable')
  await send('Profiler.setSamplingInterval', { interval: 100 })
  await send('Profiler.start')
  const load = await drive(url, 8, options.durationS, null, options.candidateChars)
  const { profile } = (await send('Profiler.stop')) as { profile: CpuProfile }
  socket.close()
  mkdirSync(dirname(options.profile!), { recursive: true })
  writeFileSync(options.profile!, JSON.stringify(profile))
  console.log(`${load.ok} /rm scores profiled in ${fixed(load.wallS)} s; profile: ${options.profile}\n`)
  console.log(topSelfTime(profile, 30))
}

/** The parts of a V8 CPU profile the summary reads. */
interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[]
  samples: number[]
  timeDeltas: number[]
}

/** The `top` functions by self time, each with its share of all samples. */
function topSelfTime(profile: CpuProfile, top: number): string {
  const byNode = new Map(profile.nodes.map((node) => [node.id, node.callFrame]))
  const selfUs = new Map<string, number>()
  let totalUs = 0
  profile.samples.forEach((nodeId, index) => {
    const frame = byNode.get(nodeId)!
    const file = frame.url.split('/').slice(-2).join('/')
    const key = `${frame.functionName || '(anonymous)'} ${file}:${frame.lineNumber + 1}`
    const delta = profile.timeDeltas[index] ?? 0
    selfUs.set(key, (selfUs.get(key) ?? 0) + delta)
    totalUs += delta
  })
  return [...selfUs.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([key, us]) => `${fixed((100 * us) / totalUs)}%  ${fixed(us / 1_000, 0)} ms  ${key}`)
    .join('\n')
}

await main()
