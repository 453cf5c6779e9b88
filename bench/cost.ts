/**
 * `npm run bench:cost [-- --per-step 500 --steps 6 --concurrency 32 --batch 64 --before <git rev> --stream]`
 *
 * What one `/score` costs on Cloudflare, counted on the local stack and priced with Cloudflare's published prices.
 * It builds the Worker behind bench/metered-worker.ts (a meter on every billed operation: Durable Object requests per
 * object, SQLite rows written by workerd's own cursor counters and each setAlarm, D1 `meta.rows_written`, queue
 * messages, Analytics Engine points, R2 writes, Worker invocations), serves it in Miniflare with a zero-latency stub
 * judge, and drives a `global` async run with `rollouts_per_step` through `--steps` whole steps of fresh rollouts:
 * one `/score` per rollout, then the same through `/compat/openrlhf` in batches of `--batch`. Like a trainer on one
 * step at a time, it sends a step's rollouts once the step before has closed, so no rollout lands past a step's cut
 * and the counts do not hang on timing; `--stream` sends every step's rollouts back to back instead (an off-policy
 * trainer's stream: each step's overshoot, about the arrival rate × the shards' 1 s report interval, is moved to the
 * next step, one row written per moved row, and varies run to run with the timing). It waits until every
 * step's update has committed and the ledger has deleted the steps' rows (the runs set `ledger_retention_steps: 0`:
 * retention only delays the deletion, the rows a rollout writes over its life are the same), so each rollout's whole
 * life is in the counts. `--before <rev>` measures a git revision the same way, in the same run, for comparison.
 * The last line reads: `cost per million /score (excl. LLM): $X; DO requests per /score: Y; rows written per
 * /score: Z; busiest object: W of /score rate`; above it, the rows written per /score by each statement (and
 * each key of a `meta` table), which tells a changed statement from run-to-run spread.
 */
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import {
  buildBundles,
  buildMetered,
  cpuSecondsOf,
  createRun,
  nextScoreBody,
  onInterrupt,
  ROOT,
  startBench,
  stubRunConfig,
  workerdPids,
  type BenchServer,
  waitForStatus,
  type Bundles,
} from './harness.ts'

/**
 * Cloudflare's prices, USD, as published on these pages on 2026-11-24 (Workers Paid; the included monthly allowances
 * are left out: one GRPO run-day is about 11.8 M /score, far above them).
 */
export const PRICES = {
  workerRequest: {
    usd: 0.3 / 1e6,
    source: 'https://developers.cloudflare.com/workers/platform/pricing/ ($0.30 per million requests)',
  },
  workerCpuMs: {
    usd: 0.02 / 1e6,
    source: 'https://developers.cloudflare.com/workers/platform/pricing/ ($0.02 per million CPU milliseconds)',
  },
  doRequest: {
    usd: 0.15 / 1e6,
    source:
      'https://developers.cloudflare.com/durable-objects/platform/pricing/ ($0.15 per million; every RPC call and ' +
      'alarm is one)',
  },
  doRowWritten: {
    usd: 1.0 / 1e6,
    source:
      'https://developers.cloudflare.com/durable-objects/platform/pricing/ (SQLite rows written $1.00 per million; ' +
      'each setAlarm is one)',
  },
  doRowRead: {
    usd: 0.001 / 1e6,
    source: 'https://developers.cloudflare.com/durable-objects/platform/pricing/ (SQLite rows read $0.001 per million)',
  },
  d1RowWritten: {
    usd: 1.0 / 1e6,
    source: 'https://developers.cloudflare.com/d1/platform/pricing/ (rows written $1.00 per million)',
  },
  d1RowRead: {
    usd: 0.001 / 1e6,
    source: 'https://developers.cloudflare.com/d1/platform/pricing/ (rows read $0.001 per million)',
  },
  queueOperation: {
    usd: 0.4 / 1e6,
    source:
      'https://developers.cloudflare.com/queues/platform/pricing/ ($0.40 per million operations; a message is 3: ' +
      'write, read, delete)',
  },
  analyticsPoint: {
    usd: 0.25 / 1e6,
    source:
      'https://developers.cloudflare.com/analytics/analytics-engine/pricing/ ($0.25 per million data points written)',
  },
  r2ClassA: {
    usd: 4.5 / 1e6,
    source: 'https://developers.cloudflare.com/r2/pricing/ (Class A operations $4.50 per million)',
  },
  embeddingToken: {
    usd: 0.067 / 1e6,
    source:
      'https://developers.cloudflare.com/workers-ai/platform/pricing/ (@cf/baai/bge-base-en-v1.5 $0.067 per million ' +
      'input tokens)',
  },
} as const

/** Memory documents are embedded in production (Workers AI); about 4 characters to a token. */
const CHARS_PER_TOKEN = 4
/**
 * The local stand-in for Vectorize (a Durable Object per run): its calls are Vectorize calls in production, priced
 * apart.
 */
const LOCAL_VECTOR_INDEX = 'MEMORY_INDEX:'
/** Dimensions of the production embedder (@cf/baai/bge-base-en-v1.5). */
const EMBEDDING_DIMENSIONS = 768
/**
 * Vectorize: $0.04 per million stored dimensions a month
 * (https://developers.cloudflare.com/vectorize/platform/pricing/).
 */
const STORED_DIMENSION_MONTH_USD = 0.04 / 1e6

interface Meter {
  workerInvocations: number
  objects: Record<string, { requests: number; alarms: number; rowsWritten: number; rowsRead: number }>
  d1: { rowsWritten: number; rowsRead: number; queries: number }
  queueMessages: number
  analyticsPoints: number
  r2Writes: number
  statements?: Record<string, { calls: number; rowsWritten: number }>
  methods?: Record<string, number>
}

interface Variant {
  label: string
  scores: number
  llmCalls: number
  cpuMs: number
  meter: Meter
  memory: { documents: number; chars: number }
  wallS: number
}

function options() {
  const { values } = parseArgs({
    options: {
      'per-step': { type: 'string', default: '500' },
      steps: { type: 'string', default: '6' },
      concurrency: { type: 'string', default: '32' },
      batch: { type: 'string', default: '64' },
      before: { type: 'string' },
      stream: { type: 'boolean', default: false },
    },
  })
  return {
    perStep: Number(values['per-step']),
    steps: Number(values.steps),
    concurrency: Number(values.concurrency),
    batch: Number(values.batch),
    before: values.before,
    stream: values.stream,
  }
}

/** A worktree of `rev` beside a temp dir, sharing this checkout's node_modules. */
function worktreeOf(rev: string, dir: string): string {
  const path = join(dir, 'before')
  execFileSync('git', ['worktree', 'add', '--detach', path, rev], { cwd: ROOT, stdio: 'ignore' })
  symlinkSync(join(ROOT, 'node_modules'), join(path, 'node_modules'))
  return path
}

async function post(server: BenchServer, path: string, token: string, body: string): Promise<Response> {
  for (let attempt = 1; ; attempt++) {
    const response = await fetch(`${server.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body,
    })
    if (response.ok || attempt >= 5 || response.status < 500) return response
    await response.body?.cancel()
    await new Promise((resolve) => setTimeout(resolve, 200 * attempt))
  }
}

/** Sends every body with `concurrency` requests in flight; fails on any answer that is not 200. */
async function drive(
  server: BenchServer,
  path: string,
  token: string,
  bodies: string[],
  concurrency: number,
): Promise<void> {
  let next = 0
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < bodies.length) {
        const body = bodies[next++]!
        const response = await post(server, path, token, body)
        if (!response.ok) throw new Error(`${path} answered ${response.status}: ${await response.text()}`)
        await response.body?.cancel()
      }
    }),
  )
}

async function meter(server: BenchServer): Promise<Meter> {
  return (await (await fetch(`${server.url}/__meter`)).json()) as Meter
}

/** Waits until `steps` steps are updated and the meter has not moved for `quietMs` (the shards' deletions are in). */
async function settle(
  server: BenchServer,
  runId: string,
  token: string,
  steps: number,
  quietMs = 4_000,
  timeoutMs = 300_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  await waitForStatus(
    server,
    runId,
    token,
    (status) => status.step >= steps - 1 && (status.status === 'updated' || status.step >= steps),
    `${steps} steps updated`,
    { timeoutMs },
  )
  let last = JSON.stringify(await meter(server))
  let stableSince = Date.now()
  while (Date.now() - stableSince < quietMs) {
    if (Date.now() > deadline) throw new Error('the meter never settled')
    await new Promise((resolve) => setTimeout(resolve, 500))
    const now = JSON.stringify(await meter(server))
    if (now !== last) {
      last = now
      stableSince = Date.now()
    }
  }
}

/** The requests that carry `scoreBodies`: one each through /score, or OpenRLHF batches of `batch`. */
function requestBodies(shape: 'score' | 'openrlhf', scoreBodies: string[], batch: number): string[] {
  if (shape === 'score') return scoreBodies
  return Array.from({ length: Math.ceil(scoreBodies.length / batch) }, (_, index) => {
    const items = scoreBodies
      .slice(index * batch, (index + 1) * batch)
      .map((body) => JSON.parse(body) as { rollout: { input: string; output: string; supplemental_context: string } })
    return JSON.stringify({
      query: items.map((item) => item.rollout.input + item.rollout.output),
      prompts: items.map((item) => item.rollout.input),
      labels: items.map((item) => item.rollout.supplemental_context),
    })
  })
}

/** Waits until the run's `step` has closed (a trainer on one step at a time sends the next step's rollouts then). */
const stepClosed = (server: BenchServer, runId: string, token: string, step: number) =>
  waitForStatus(
    server,
    runId,
    token,
    (status) => status.step > step || (status.step === step && status.status !== 'collecting'),
    `step ${step} to close`,
    { timeoutMs: 120_000, intervalMs: 50 },
  )

/** Drives one run on a fresh server: `steps` × `perStep` rollouts by /score, or by /compat/openrlhf in batches. */
async function measureVariant(
  bundles: Bundles,
  built: Awaited<ReturnType<typeof buildMetered>>,
  label: string,
  shape: 'score' | 'openrlhf',
  o: ReturnType<typeof options>,
): Promise<Variant> {
  const server = await startBench(bundles, {
    stub: 'node',
    storage: 'memory',
    workerScript: built.script,
    workerOptions: built.workerOptions,
    migrationsDir: built.migrationsDir,
  })
  try {
    const runId = `cost-${shape}`
    const token = await createRun(server, runId, {
      ...stubRunConfig(server.stubBaseUrl),
      rollouts_per_step: o.perStep,
      ledger_retention_steps: 0,
    })
    const total = o.perStep * o.steps
    // Paced, each step's rollouts say their trainer step, as a trainer's do; streamed, they all say the same one.
    const steps = Array.from({ length: o.steps }, (_, step) =>
      Array.from({ length: o.perStep }, () => {
        const body = nextScoreBody(shape, 1_200)
        if (o.stream) return body
        const parsed = JSON.parse(body) as { metadata: { current_step: number } }
        parsed.metadata.current_step = step
        return JSON.stringify(parsed)
      }),
    )
    const path = shape === 'score' ? `/runs/${runId}/score` : `/runs/${runId}/compat/openrlhf`
    const concurrency = shape === 'score' ? o.concurrency : Math.max(1, Math.floor(o.concurrency / 8))
    const pids = workerdPids()
    const cpuBefore = cpuSecondsOf(pids)
    const callsBefore = await server.stubCalls()
    const started = performance.now()
    if (o.stream) await drive(server, path, token, requestBodies(shape, steps.flat(), o.batch), concurrency)
    else {
      for (const [step, scoreBodies] of steps.entries()) {
        await drive(server, path, token, requestBodies(shape, scoreBodies, o.batch), concurrency)
        await stepClosed(server, runId, token, step)
      }
    }
    await settle(server, runId, token, o.steps)
    const wallS = (performance.now() - started) / 1_000
    const db = await server.mf.getD1Database('DB', 'app')
    const memory = (await db
      .prepare('SELECT count(*) AS documents, coalesce(sum(length(text)), 0) AS chars FROM memory_documents')
      .first()) as { documents: number; chars: number }
    return {
      label,
      scores: total,
      llmCalls: (await server.stubCalls()) - callsBefore,
      cpuMs: (cpuSecondsOf(pids) - cpuBefore) * 1_000,
      meter: await meter(server),
      memory,
      wallS,
    }
  } finally {
    await server.dispose()
  }
}

/** Per-/score units and dollars of one variant. */
function costOf(variant: Variant) {
  const per = (n: number) => n / variant.scores
  const objects = Object.entries(variant.meter.objects).filter(([name]) => !name.startsWith(LOCAL_VECTOR_INDEX))
  const sum = (key: 'requests' | 'rowsWritten' | 'rowsRead') =>
    objects.reduce((total, [, usage]) => total + usage[key], 0)
  const busiest = objects.reduce(
    (best, [name, usage]) => (usage.requests > best.requests ? { name, requests: usage.requests } : best),
    { name: '(none)', requests: 0 },
  )
  const units = {
    workerInvocations: per(variant.meter.workerInvocations),
    cpuMs: per(variant.cpuMs),
    doRequests: per(sum('requests')),
    doRowsWritten: per(sum('rowsWritten')),
    doRowsRead: per(sum('rowsRead')),
    d1RowsWritten: per(variant.meter.d1.rowsWritten),
    d1RowsRead: per(variant.meter.d1.rowsRead),
    queueOperations: per(variant.meter.queueMessages * 3),
    analyticsPoints: per(variant.meter.analyticsPoints),
    r2Writes: per(variant.meter.r2Writes),
    embeddingTokens: per(variant.memory.chars / CHARS_PER_TOKEN),
    llmCalls: per(variant.llmCalls),
  }
  const usd = {
    workerInvocations: units.workerInvocations * PRICES.workerRequest.usd,
    cpuMs: units.cpuMs * PRICES.workerCpuMs.usd,
    doRequests: units.doRequests * PRICES.doRequest.usd,
    doRowsWritten: units.doRowsWritten * PRICES.doRowWritten.usd,
    doRowsRead: units.doRowsRead * PRICES.doRowRead.usd,
    d1RowsWritten: units.d1RowsWritten * PRICES.d1RowWritten.usd,
    d1RowsRead: units.d1RowsRead * PRICES.d1RowRead.usd,
    queueOperations: units.queueOperations * PRICES.queueOperation.usd,
    analyticsPoints: units.analyticsPoints * PRICES.analyticsPoint.usd,
    r2Writes: units.r2Writes * PRICES.r2ClassA.usd,
    embeddingTokens: units.embeddingTokens * PRICES.embeddingToken.usd,
  }
  const perMillion = Object.values(usd).reduce((total, value) => total + value, 0) * 1e6
  const byClass: Record<string, { requests: number; rowsWritten: number }> = {}
  for (const [name, usage] of objects) {
    const sums = (byClass[name.slice(0, name.indexOf(':'))] ??= { requests: 0, rowsWritten: 0 })
    sums.requests += per(usage.requests)
    sums.rowsWritten += per(usage.rowsWritten)
  }
  const vectorStorageMonthPerMillion =
    per(variant.memory.documents) * EMBEDDING_DIMENSIONS * STORED_DIMENSION_MONTH_USD * 1e6
  return {
    units,
    usd,
    perMillion,
    rowsWritten: units.doRowsWritten + units.d1RowsWritten,
    busiest: { name: busiest.name, share: per(busiest.requests) },
    byClass,
    vectorStorageMonthPerMillion,
  }
}

const fmt = (value: number, digits = 3) => (Math.abs(value) >= 100 ? value.toFixed(0) : value.toFixed(digits))

function printTable(variants: Variant[]): void {
  const costs = variants.map(costOf)
  const rows: [string, (cost: ReturnType<typeof costOf>) => string][] = [
    ['Worker invocations', (c) => fmt(c.units.workerInvocations)],
    ['workerd CPU ms (all objects, background included)', (c) => fmt(c.units.cpuMs)],
    ['Durable Object requests (RPC calls + alarms; the local vector index left out)', (c) => fmt(c.units.doRequests)],
    ['Durable Object rows written (incl. setAlarm)', (c) => fmt(c.units.doRowsWritten)],
    ['D1 rows written', (c) => fmt(c.units.d1RowsWritten)],
    ['queue operations (3 per message)', (c) => fmt(c.units.queueOperations)],
    ['Analytics Engine data points', (c) => fmt(c.units.analyticsPoints)],
    ['R2 writes (archive)', (c) => fmt(c.units.r2Writes)],
    ['memory text embedded in production, tokens', (c) => fmt(c.units.embeddingTokens, 1)],
    ['LLM calls (all roles; not priced)', (c) => fmt(c.units.llmCalls)],
    ['busiest object, requests per /score', (c) => fmt(c.busiest.share)],
    ['$ per million /score, excl. LLM', (c) => `$${c.perMillion.toFixed(2)}`],
    ['+ vectors kept, $ per million /score per month', (c) => `$${c.vectorStorageMonthPerMillion.toFixed(2)}`],
  ]
  const width = Math.max(...rows.map(([label]) => label.length))
  console.log(`\n${'per /score'.padEnd(width)}  ${variants.map((v) => v.label.padEnd(28)).join('')}`)
  for (const [label, cell] of rows)
    console.log(`${label.padEnd(width)}  ${costs.map((c) => cell(c).padEnd(28)).join('')}`)
  console.log(`\nbusiest object: ${costs.map((c, i) => `${variants[i]!.label}: ${c.busiest.name}`).join('; ')}`)
  console.log(
    'by Durable Object class, requests / rows written per /score: ' +
      costs
        .map(
          (c, i) =>
            `${variants[i]!.label}: ${Object.entries(c.byClass)
              .map(([name, sums]) => `${name} ${fmt(sums.requests)} / ${fmt(sums.rowsWritten)}`)
              .join(', ')}`,
        )
        .join('; '),
  )
  printStatements(variants)
  printMethods(variants)
  console.log(`\n$ per million /score by item (${variants.map((v) => v.label).join(' | ')}):`)
  for (const key of Object.keys(costs[0]!.usd) as (keyof ReturnType<typeof costOf>['usd'])[]) {
    console.log(`  ${key.padEnd(20)} ${costs.map((c) => `$${(c.usd[key] * 1e6).toFixed(3)}`.padStart(10)).join('')}`)
  }
}

/** Durable Object requests per /score by the method called (alarms included), the most called first. */
function printMethods(variants: Variant[]): void {
  const perScore = (variant: Variant, method: string) => (variant.meter.methods?.[method] ?? 0) / variant.scores
  const methods = [...new Set(variants.flatMap((variant) => Object.keys(variant.meter.methods ?? {})))]
    .filter((method) => !method.startsWith(LOCAL_VECTOR_INDEX.slice(0, -1)))
    .sort((a, b) => Math.max(...variants.map((v) => perScore(v, b))) - Math.max(...variants.map((v) => perScore(v, a))))
  if (methods.length === 0) return
  console.log(`\nDurable Object requests per /score by method (${variants.map((v) => v.label).join(' | ')}):`)
  for (const method of methods)
    console.log(`  ${variants.map((v) => fmt(perScore(v, method), 4).padStart(10)).join('')}  ${method}`)
}

/** Rows written per /score by each statement that writes (a `<binding>|<SQL>` key), the largest first. */
function printStatements(variants: Variant[]): void {
  const keys = new Set(variants.flatMap((variant) => Object.keys(variant.meter.statements ?? {})))
  const perScore = (variant: Variant, key: string, field: 'calls' | 'rowsWritten') =>
    (variant.meter.statements?.[key]?.[field] ?? 0) / variant.scores
  const rows = [...keys]
    .filter((key) => variants.some((variant) => perScore(variant, key, 'rowsWritten') > 0))
    .sort(
      (a, b) =>
        Math.max(...variants.map((v) => perScore(v, b, 'rowsWritten'))) -
        Math.max(...variants.map((v) => perScore(v, a, 'rowsWritten'))),
    )
  if (rows.length === 0) return
  console.log(`\nrows written per /score by statement, rows (calls) (${variants.map((v) => v.label).join(' | ')}):`)
  for (const key of rows) {
    const cells = variants.map((v) =>
      `${fmt(perScore(v, key, 'rowsWritten'), 4)} (${fmt(perScore(v, key, 'calls'), 4)})`.padStart(18),
    )
    // Long statements are cut in the middle: the start names the table, a `meta` write's key is at the end.
    console.log(`  ${cells.join('')}  ${key.length > 110 ? `${key.slice(0, 80)}…${key.slice(-29)}` : key}`)
  }
}

async function main(): Promise<void> {
  const o = options()
  const tmp = mkdtempSync(join(tmpdir(), 'rh-bench-cost-'))
  const cleanup = () => {
    if (o.before && existsSync(join(tmp, 'before')))
      execFileSync('git', ['worktree', 'remove', '--force', join(tmp, 'before')], { cwd: ROOT, stdio: 'ignore' })
    rmSync(tmp, { recursive: true, force: true })
  }
  const forget = onInterrupt(cleanup)
  try {
    mkdirSync(join(tmp, 'build'))
    const bundles = await buildBundles(join(tmp, 'build'))
    const variants: Variant[] = []
    if (o.before) {
      const before = await buildMetered(worktreeOf(o.before, tmp), join(tmp, 'metered-before'))
      variants.push(await measureVariant(bundles, before, `/score @ ${o.before}`, 'score', o))
      variants.push(await measureVariant(bundles, before, `openrlhf ×${o.batch} @ ${o.before}`, 'openrlhf', o))
    }
    const now = await buildMetered(ROOT, join(tmp, 'metered'))
    variants.push(await measureVariant(bundles, now, '/score (this tree)', 'score', o))
    variants.push(await measureVariant(bundles, now, `openrlhf ×${o.batch} (this tree)`, 'openrlhf', o))
    console.log(
      `npm run bench:cost -- --per-step ${o.perStep} --steps ${o.steps} --concurrency ${o.concurrency} --batch ` +
        `${o.batch}${o.before ? ` --before ${o.before}` : ''}${o.stream ? ' --stream' : ''}`,
    )
    console.log(
      `a global async run, rollouts_per_step ${o.perStep}, ${o.steps} steps of fresh rollouts (~1.2 KB ` +
        `outputs, ${o.stream ? 'streamed back to back' : 'each step sent once the one before closed'}), stub ` +
        `judge; every step's update committed and its rows deleted before counting`,
    )
    for (const variant of variants)
      console.log(`  ${variant.label}: ${variant.scores} rollouts in ${variant.wallS.toFixed(1)} s`)
    printTable(variants)
    console.log(
      '\nprices: ' +
        Object.values(PRICES)
          .map((price) => price.source)
          .join('; '),
    )
    const headline = costOf(variants.find((variant) => variant.label === '/score (this tree)')!)
    console.log(
      `cost per million /score (excl. LLM): $${headline.perMillion.toFixed(2)}; DO requests per /score: ` +
        `${headline.units.doRequests.toFixed(3)}; ` +
        `rows written per /score: ${headline.rowsWritten.toFixed(3)}; busiest object: ` +
        `${headline.busiest.share.toFixed(3)} of /score rate`,
    )
  } finally {
    forget()
    cleanup()
  }
}

await main()
