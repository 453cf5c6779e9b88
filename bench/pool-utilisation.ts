/**
 * How close the endpoint pool gets to its ideal throughput: stub OpenAI-compatible endpoints answer
 * every chat request after a fixed latency (50 ms), the pool runs N calls at concurrency C, and the
 * wall time is compared with the ideal `N × latency / C`. Utilisation = ideal / wall (target ≥ 90%). The requests are
 * judge-shaped (8 groups sharing a long prefix each, an answer per call), so the pool's cache affinity is in play.
 *
 *   npx tsx bench/pool-utilisation.ts [--calls 600] [--latency 50] [--endpoints 3] [--levels 1,4,12,24] [--repeat 3]
 *
 * The stub servers run in a child process (plain node:http), as remote servers would, so they do not
 * share the pool's event loop. Each level C spreads its slots over the endpoints (C = 12 on 3
 * endpoints is 4 + 4 + 4) and runs min(N, 50·C) calls, all submitted at once (the pool queues them).
 * Next to the pool, the same calls run through bare `fetch` loops (C of them, pinned to the same
 * endpoints): the machine's own ceiling, so a busy box is not mistaken for pool overhead.
 */
import { spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { parseArgs } from 'node:util'
import type { ChatRequest } from '../src/llm/types.ts'
import { EndpointPool } from '../offline/llm/pool.ts'

/** The stub servers: `node -e STUB_SERVER <latencyMs> <count>` prints one base URL per line. */
const STUB_SERVER = `
const http = require('node:http')
const latency = Number(process.argv[1]), count = Number(process.argv[2])
const reply = (model) => JSON.stringify({ id: 'x', object: 'chat.completion', created: 0, model,
  choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: '{"ok":true}' } }],
  usage: { prompt_tokens: 10, completion_tokens: 2 } })
for (let i = 0; i < count; i++) {
  const server = http.createServer((req, res) => {
    if (req.method === 'GET') { res.writeHead(200, { 'content-type': 'application/json' }); return \
res.end('{"object":"list","data":[]}') }
    const chunks = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', () => {
      const model = JSON.parse(Buffer.concat(chunks).toString()).model
      setTimeout(() => { res.writeHead(200, { 'content-type': 'application/json' }); res.end(reply(model)) }, latency)
    })
  })
  server.keepAliveTimeout = 10000
  server.listen(0, '127.0.0.1', () => console.log('http://127.0.0.1:' + server.address().port + '/v1'))
}
`

interface Row {
  concurrency: number
  caps: string
  calls: number
  idealMs: number
  /** The same calls by C bare `fetch` loops pinned to the same endpoints: what this machine allows without any pool. */
  fetchWallMs: number
  wallMs: number
  /** Σ attempt time / (C × wall): how much of the time the pool kept its slots busy. */
  occupancy: number
  /** Mean time of one HTTP attempt (the pool's own accounting): latency plus client and server overhead. */
  attemptMs: number
  /** Client (this process) CPU per call through the pool. */
  cpuMsPerCall: number
}

/**
 * Starts `count` fixed-latency stub endpoints in a child process and returns their base URLs.
 * @example const { urls, stop } = await startStubProcess(50, 3)
 */
export async function startStubProcess(
  latencyMs: number,
  count: number,
): Promise<{ urls: string[]; stop: () => void }> {
  const child = spawn(process.execPath, ['-e', STUB_SERVER, String(latencyMs), String(count)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const urls: string[] = []
  const lines = createInterface({ input: child.stdout! })
  await new Promise<void>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`the stub process exited (${code})`)))
    lines.on('line', (line) => {
      urls.push(line.trim())
      if (urls.length === count) resolve()
    })
  })
  return { urls, stop: () => void child.kill() }
}

/**
 * Splits `concurrency` slots over at most `endpoints` endpoints as evenly as possible (12 over 3 → 4, 4, 4).
 * @example spreadCaps(4, 3) // [2, 1, 1]
 */
export function spreadCaps(concurrency: number, endpoints: number): number[] {
  const used = Math.min(concurrency, endpoints)
  return Array.from({ length: used }, (_, i) => Math.floor(concurrency / used) + (i < concurrency % used ? 1 : 0))
}

/** Judge prompts of 8 groups: a ~1,500-character prefix per group, then the answer in its own data block. */
const GROUP_PREFIXES = Array.from(
  { length: 8 },
  (_, group) => `Group ${group}: ${'criteria and prompt text '.repeat(60)}`,
)

/** A judge-shaped request (so the pool's cache affinity is in play): call i is answer i of group i mod 8. */
const chatRequest = (i: number): ChatRequest => ({
  role: 'scorer',
  messages: [
    {
      role: 'user',
      content: `${GROUP_PREFIXES[Math.abs(i) % 8]}\n\nThe answer (data):\n<<<DATA-a${i}\nanswer ${i}\nDATA-a${i}>>>`,
    },
  ],
  task: undefined as unknown as ChatRequest['task'],
  json: true,
})

/**
 * Runs `calls` requests through a pool with the given per-endpoint caps, all submitted at once, and
 * measures wall time, slot occupancy, mean attempt time and client CPU per call.
 * @example const { wallMs } = await measurePool(urls, [4, 4, 4], 600)
 */
export async function measurePool(
  urls: string[],
  caps: number[],
  calls: number,
): Promise<Pick<Row, 'wallMs' | 'occupancy' | 'attemptMs' | 'cpuMsPerCall'>> {
  const pool = new EndpointPool({
    endpoints: caps.map((cap, i) => ({ base_url: urls[i]!, max_concurrency: cap })),
    model: 'bench-model',
    timeoutMs: 10_000,
  })
  await pool.ready()
  const concurrency = caps.reduce((sum, cap) => sum + cap, 0)
  // Warm-up: open the connections and load the SDK, outside the measurement.
  await Promise.all(Array.from({ length: concurrency }, (_, i) => pool.complete(chatRequest(-i))))
  const before = pool.usage().total
  const cpu = process.cpuUsage()
  const started = performance.now()
  await Promise.all(Array.from({ length: calls }, (_, i) => pool.complete(chatRequest(i))))
  const wallMs = performance.now() - started
  const { user, system } = process.cpuUsage(cpu)
  const after = pool.usage().total
  await pool.close()
  if (after.ok - before.ok !== calls || after.calls !== after.ok)
    throw new Error(`unexpected failures: ${JSON.stringify(after)}`)
  const busyMs = after.wall_ms - before.wall_ms
  return {
    wallMs,
    occupancy: busyMs / (concurrency * wallMs),
    attemptMs: busyMs / calls,
    cpuMsPerCall: (user + system) / 1_000 / calls,
  }
}

/**
 * The no-pool baseline: `cap` bare `fetch` loops per endpoint share `calls` requests.
 * @example const wallMs = await measureFetch(urls, [4, 4, 4], 600)
 */
export async function measureFetch(urls: string[], caps: number[], calls: number): Promise<number> {
  const body = JSON.stringify({
    model: 'bench-model',
    messages: [{ role: 'user', content: 'q' }],
    temperature: 0,
    max_tokens: 1_024,
    response_format: { type: 'json_object' },
  })
  const post = (url: string) =>
    fetch(`${url}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer x' },
      body,
    }).then((response) => response.json())
  const workers = caps.flatMap((cap, i) => Array.from({ length: cap }, () => urls[i]!))
  await Promise.all(workers.map(post))
  let next = 0
  const started = performance.now()
  await Promise.all(
    workers.map(async (url) => {
      while (next++ < calls) await post(url)
    }),
  )
  return performance.now() - started
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

/**
 * One level C: the fetch baseline and the pool, each `repeat` times, medians reported.
 * @example const row = await measureLevel(urls, [4, 4, 4], 600, 50, 3)
 */
export async function measureLevel(
  urls: string[],
  caps: number[],
  calls: number,
  latencyMs: number,
  repeat: number,
): Promise<Row> {
  const concurrency = caps.reduce((sum, cap) => sum + cap, 0)
  const fetchRuns: number[] = []
  const poolRuns: Awaited<ReturnType<typeof measurePool>>[] = []
  for (let i = 0; i < repeat; i++) {
    fetchRuns.push(await measureFetch(urls, caps, calls))
    poolRuns.push(await measurePool(urls, caps, calls))
  }
  const middle = poolRuns.find((run) => run.wallMs === median(poolRuns.map((r) => r.wallMs)))!
  return {
    concurrency,
    caps: caps.join('+'),
    calls,
    idealMs: (calls * latencyMs) / concurrency,
    fetchWallMs: median(fetchRuns),
    ...middle,
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      calls: { type: 'string', default: '600' },
      latency: { type: 'string', default: '50' },
      endpoints: { type: 'string', default: '3' },
      levels: { type: 'string', default: '1,4,12,24' },
      repeat: { type: 'string', default: '3' },
    },
  })
  const calls = Number(values.calls)
  const latencyMs = Number(values.latency)
  const endpoints = Number(values.endpoints)
  const levels = values.levels.split(',').map(Number)
  const repeat = Number(values.repeat)
  const os = await import('node:os')
  console.log(
    `$ npx tsx bench/pool-utilisation.ts --calls ${calls} --latency ${latencyMs} --endpoints ${endpoints} --levels ` +
      `${levels.join(',')} --repeat ${repeat}`,
  )
  console.log(
    `node ${process.version}, ${os.cpus().length} cores, load average ${os
      .loadavg()
      .map((load) => load.toFixed(1))
      .join(' ')}; stub endpoints answer after ${latencyMs} ms, in a child process; medians of ${repeat} runs\n`,
  )
  const stubs = await startStubProcess(latencyMs, endpoints)
  const rows: Row[] = []
  try {
    for (const level of levels)
      rows.push(
        await measureLevel(stubs.urls, spreadCaps(level, endpoints), Math.min(calls, 50 * level), latencyMs, repeat),
      )
  } finally {
    stubs.stop()
  }
  const percent = (value: number) => `${(value * 100).toFixed(1)}%`
  const header = [
    'C',
    'caps',
    'calls',
    'ideal ms',
    'fetch-only ms',
    'fetch-only util',
    'pool ms',
    'pool util',
    'pool vs fetch-only',
    'slot occupancy',
    'attempt ms',
    'CPU ms/call',
  ]
  const table = rows.map((row) => [
    String(row.concurrency),
    row.caps,
    String(row.calls),
    row.idealMs.toFixed(0),
    row.fetchWallMs.toFixed(0),
    percent(row.idealMs / row.fetchWallMs),
    row.wallMs.toFixed(0),
    percent(row.idealMs / row.wallMs),
    percent(row.fetchWallMs / row.wallMs),
    percent(row.occupancy),
    row.attemptMs.toFixed(1),
    row.cpuMsPerCall.toFixed(2),
  ])
  const widths = header.map((title, i) => Math.max(title.length, ...table.map((cells) => cells[i]!.length)))
  const line = (cells: string[]) => `| ${cells.map((cell, i) => cell.padStart(widths[i]!)).join(' | ')} |`
  console.log(line(header))
  console.log(`|${widths.map((width) => `${'-'.repeat(width + 1)}:`).join('|')}|`)
  for (const cells of table) console.log(line(cells))
  const below = rows.filter((row) => row.idealMs / row.wallMs < 0.9)
  console.log(
    below.length === 0
      ? '\npool utilisation ≥ 90% at every level'
      : `\npool utilisation below 90% at C = ${below.map((row) => row.concurrency).join(', ')}`,
  )
  console.log(
    'pool util = ideal / pool wall; fetch-only = the same calls without the pool (bare fetch loops, same caps): the',
  )
  console.log("machine's own ceiling. slot occupancy = Σ attempt time / (C × wall). attempt ms = mean HTTP round trip.")
}

if (process.argv[1] && import.meta.url === (await import('node:url')).pathToFileURL(process.argv[1]).href) await main()
