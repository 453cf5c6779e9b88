/**
 * `npx tsx bench/score-breakdown.ts [--target mock|stub] [--duration s] [--rounds n] [--only a,b] [--storage memory|disk]`:
 * what does each piece of POST /score cost? Builds the Worker once, then for every variant copies the
 * bundle, rewrites one piece out of it (no source file changes), serves the copy from a fresh Miniflare and
 * measures req/s and workerd CPU per request at 64 connections plus p50/p99 at 1 connection. The gain of
 * a variant over the baseline is what that piece costs (or what a proposed change would save). Every round
 * also loads the bare Hono handler (row `bare`, column `÷bare`: the ratio issue 2 holds to 0.8).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { parseArgs } from 'node:util'
import {
  BARE_HOST, buildBundles, createRun, measure, ROOT, scoreOnce, startBench, stubRunConfig, waitForIdle,
  onInterrupt, type Bundles, type LoadTarget, type Measurement, type StorageKind,
} from './harness.ts'

/** One textual rewrite of the bundle; `count` is how many matches it must have (default 1). */
export interface Patch {
  find: RegExp
  replace: string
  count?: number
}

export interface Variant {
  name: string
  description: string
  patches: Patch[]
  /** The targets this variant means something for (all when absent). */
  targets?: BreakdownOptions['target'][]
  /** Load the bare Hono handler instead of the target (the reference row). */
  bare?: true
}

const CONSTANT_JUDGEMENT = 'score: 0.7, criteria: prepared.snapshot.rubrics.map((r) => ({ rubric_id: r.id, grade: 7, weight: r.weight }))'

/** Each variant removes or replaces one piece of the /score path in a copy of the bundle. */
const PIECES: Record<string, Omit<Variant, 'name'>> = {
  'no-d1-persist': {
    description: 'drop the D1 rows (score event + llm call rows) that the isolate outbox writes in batches',
    patches: [{ find: /write: writeRecords \}\)/, replace: 'write: async () => {} })' }],
  },
  'no-analysis-enqueue': {
    description: 'no analysis job per scored rollout (nothing into the queue outbox, so no background analyzer, memory and D1 work)',
    patches: [{ find: /\w+\.add\(env\.ANALYSIS_QUEUE, \w+, ctx\.defer\);/, replace: '' }],
  },
  'analysis-send-each': {
    description: 'each /score sends its analysis job itself (queue.send in waitUntil) instead of through the batching outbox',
    patches: [{ find: /(\w+)\.add\(env\.ANALYSIS_QUEUE, (\w+), ctx\.defer\);/, replace: 'ctx.defer(env.ANALYSIS_QUEUE.send($2));' }],
  },
  'no-zod-body': {
    description: 'skip the zod validation of the request body (JSON.parse kept)',
    patches: [{ find: /const parsed = schema\.safeParse\((\w+)\);/, replace: 'const parsed = { success: true, data: $1 };' }],
  },
  'no-judgement-key': {
    description: 'judgement key = rollout id (no canonicalJson + sha256 of the rollout)',
    patches: [{ find: /async function judgementKey\(\w+, \w+, \w+, (\w+), [^)]*\) \{/, replace: '$& return $1.id;' }],
  },
  'no-judge': {
    description: 'constant judgement instead of judge() (no prompt build, model call, reply parse)',
    patches: [{ find: /const judgement = (\w+) \? prepared\.judgement : await judge\(ctx, prepared\.snapshot, request\);/, replace: `const judgement = $1 ? prepared.judgement : { ${CONSTANT_JUDGEMENT} };` }],
  },
  'no-admit': {
    description: 'skip the RubricInstance→RunCoordinator.admit RPC (and its 7 SQL statements)',
    patches: [{ find: /const \{ step((?:, \w+)*) \} = await coordinator\.admit\([^;]*\);/, replace: 'const { step$1 } = { step: this.currentStep() };' }],
  },
  'no-prepare-rpc': {
    description: 'skip the Worker→RubricInstance.prepare RPC (rubric snapshot cached in the isolate)',
    patches: [{ find: /const prepared = await againAfterReset\(\(\) => fresh\(\)\.prepare\(address, request\.rollout\.id, key\)\);/, replace: 'const prepared = { kind: "fresh", snapshot: globalThis.__benchSnapshot ??= await fresh().snapshot(address) };' }],
  },
  'no-record-rpc': {
    description: 'skip the Worker→RubricInstance.record RPC (and so admit): nothing is recorded',
    patches: [
      {
        find: /const \{ entry, duplicate \} = await againAfterReset\(\(\) => fresh\(\)\.record\(/,
        replace: 'const { entry, duplicate } = ((f) => f())(() => ((...args) => { const j = args.at(-1); return { entry: { rollout_id: request.rollout.id, step: 0, rubric_version: j.rubricVersion, score: j.judgement.score, criteria: j.judgement.criteria, cached: j.cached }, duplicate: false }; })(',
      },
    ],
  },
  'rpc-transport-only': {
    description: 'prepare and record still called, but return at once (no SQL, no admit): the cost of 2 RPCs is what remains',
    patches: [
      { find: /async prepare\(\w+, \w+, \w+\) \{/, replace: '$& if (this.cachedSnapshot) return { kind: "fresh", snapshot: this.cachedSnapshot };' },
      { find: /async record\(\w+, (\w+), (?:\w+, )*(\w+)\) \{/, replace: '$& return { entry: { step: 0, rollout_id: $1.id, rubric_version: $2.rubricVersion, score: $2.judgement.score, criteria: $2.judgement.criteria, cached: $2.cached }, duplicate: false };' },
    ],
  },
  'fetch-llm-client': {
    description: 'the openai backend calls fetch directly instead of the openai SDK (same request and reply)',
    targets: ['stub'],
    patches: [
      {
        find: /const completion = await client\.chat\.completions\.create\(\n(\s*\{[\s\S]*?\n\s*\}),\n\s*\{ signal \}\n\s*\);/,
        replace:
          'const completion = await (async () => { const res = await fetch(`${this.settings.baseURL}/chat/completions`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${this.settings.apiKey}` }, body: JSON.stringify($1), signal }); if (!res.ok) throw Object.assign(new Error(`HTTP ${res.status}`), { status: res.status, headers: res.headers }); return res.json(); })();',
      },
    ],
  },
  'app-floor': {
    description: 'the real app and middleware (request id, body limit, auth, run, JSON + zod), /score answers a constant',
    patches: [{ find: /(var scoreRoute = new \w+\(\)\.post\("\/score", jsonBody\(ScoreRequest\), async \((\w+)\) => \{)/, replace: '$1 return $2.json({ score: 0.7, rollout_id: $2.get("body").rollout.id });' }],
  },
}

const combine = (name: string, description: string, parts: string[]): Variant => ({ name, description, patches: parts.flatMap((part) => PIECES[part]!.patches) })

/** What every floor variant strips: the objects' SQL (RPCs answer at once), the D1 rows, the analysis job and the judgement key. */
const FLOOR = ['rpc-transport-only', 'no-d1-persist', 'no-analysis-enqueue', 'no-judgement-key']

/**
 * The variants measured, baseline first: single pieces, then combinations.
 * @example const variants = allVariants().filter((v) => v.name === 'no-d1-persist')
 */
export function allVariants(): Variant[] {
  return [
    { name: 'baseline', description: 'the Worker as built', patches: [] },
    { name: 'bare', description: 'the bare Hono handler: parses the same body, answers a constant (the runtime\'s limit here)', patches: [], bare: true },
    ...Object.entries(PIECES).map(([name, piece]) => ({ name, ...piece })),
    combine('no-do-rpcs', 'skip prepare and record (no Durable Object on the request path)', ['no-prepare-rpc', 'no-record-rpc']),
    combine('floor-2-rpcs', '2 no-op RPCs + the app: rpc-transport-only + no-d1-persist + no-analysis-enqueue + no-judge + no-judgement-key', [...FLOOR, 'no-judge']),
    // The issue's own probe (one Durable Object round trip per request), then the same plus judging: the least a /score can be.
    combine('floor-1-rpc', '1 no-op RPC + the app: floor-2-rpcs without the prepare RPC (snapshot cached in the isolate)', [...FLOOR, 'no-prepare-rpc', 'no-judge']),
    combine('floor-1-rpc-judge', '1 no-op RPC + judging (prompt, LLM call, reply parsing) + the app: no SQL, no D1 rows, no analysis', [...FLOOR, 'no-prepare-rpc']),
    { ...combine('floor-1-rpc-fetch-judge', 'floor-1-rpc-judge with the LLM called by plain fetch instead of the openai SDK', [...FLOOR, 'no-prepare-rpc', 'fetch-llm-client']), targets: ['stub'] },
    { name: 'baseline-again', description: 'the Worker as built, measured again (drift check)', patches: [] },
  ]
}

/**
 * Applies patches to a bundle's text; throws naming the first patch whose match count is wrong.
 * @example const patched = applyPatches(source, PIECES['no-d1-persist'].patches)
 */
export function applyPatches(source: string, patches: readonly Patch[]): string {
  let text = source
  for (const patch of patches) {
    const flags = patch.find.flags.includes('g') ? patch.find.flags : `${patch.find.flags}g`
    const matches = text.match(new RegExp(patch.find.source, flags))?.length ?? 0
    const expected = patch.count ?? 1
    if (matches !== expected) throw new Error(`patch ${patch.find} matched ${matches} time(s), expected ${expected}`)
    text = text.replace(new RegExp(patch.find.source, flags), patch.replace)
  }
  return text
}

export interface VariantResult {
  name: string
  description: string
  error?: string
  throughput?: Measurement
  latency?: Measurement
  /** workerd CPU ms per 2xx response at 64 connections, all-in: with the background work it caused (NaN if not drained). */
  cpuMsPerRequest?: number
  /** The same, counting only the measured window. */
  windowCpuMsPerRequest?: number
  /** Score events in D1 after the run (0 when the variant drops them). */
  d1Rows?: number
  /** Every round's figures; the others are the best round's. */
  rounds?: { rps: number | null; cpuMsPerRequest: number | null; otherCpu: number | null }[]
}

async function measureVariant(bundles: Bundles, variant: Variant, workDir: string, options: BreakdownOptions): Promise<VariantResult> {
  const base = { name: variant.name, description: variant.description }
  let script: string
  try {
    script = join(workDir, variant.name, 'index.js')
    mkdirSync(dirname(script), { recursive: true })
    writeFileSync(script, applyPatches(readFileSync(bundles.workerScript, 'utf8'), variant.patches))
  } catch (error) {
    return { ...base, error: (error as Error).message }
  }
  const server = await startBench(bundles, { stub: 'node', storage: options.storage, workerScript: script })
  try {
    const target: LoadTarget =
      options.target === 'stub' && !variant.bare
        ? { label: variant.name, path: '/runs/bench-stub/score', headers: { authorization: `Bearer ${await createRun(server, 'bench-stub', stubRunConfig(server.stubBaseUrl))}` }, prefix: 'stub' }
        : options.target === 'bare' || variant.bare
          ? { label: variant.name, path: '/score', headers: { host: BARE_HOST }, prefix: 'bare' }
          : { label: variant.name, path: '/score', prefix: 'mock' }
    await scoreOnce(server.url, target)
    const load = { durationS: options.durationS, warmupS: options.warmupS, outputChars: 1200, idleCapS: 20 }
    const throughput = await measure(server.url, target, { ...load, connections: options.connections })
    const latency = options.latencyS > 0 ? await measure(server.url, target, { ...load, connections: 1, durationS: options.latencyS, warmupS: 1 }) : undefined
    await new Promise((resolve) => setTimeout(resolve, 300))
    const db = await server.mf.getD1Database('DB', 'app')
    const d1Rows = ((await db.prepare('SELECT count(*) AS n FROM score_events').first<{ n: number }>())?.n ?? 0)
    const failures = throughput.non2xx + throughput.errors + throughput.timeouts
    return {
      ...base,
      ...(failures > 0 ? { error: `${failures} failed requests: ${JSON.stringify(throughput.statusCodes)}` } : {}),
      throughput,
      ...(latency ? { latency } : {}),
      cpuMsPerRequest: throughput.workerdCpuMsPerRequest.allIn ?? Number.NaN,
      windowCpuMsPerRequest: throughput.workerdCpuMsPerRequest.window,
      d1Rows,
    }
  } catch (error) {
    return { ...base, error: (error as Error).message.slice(0, 300) }
  } finally {
    await server.dispose()
  }
}

export interface BreakdownOptions {
  target: 'mock' | 'stub' | 'bare'
  durationS: number
  warmupS: number
  latencyS: number
  connections: number
  storage: StorageKind
  only: string[]
  rounds: number
}

/**
 * Measures every selected variant in its own Miniflare, `rounds` times round-robin (so drift and busy
 * neighbours hit every variant alike), keeps each variant's least-disturbed round (highest req/s) and
 * prints gains over the baseline.
 * @example const results = await runBreakdown({ target: 'mock', durationS: 6, warmupS: 2, latencyS: 3, connections: 64, storage: 'memory', only: [], rounds: 2 })
 */
export async function runBreakdown(options: BreakdownOptions): Promise<VariantResult[]> {
  const workDir = mkdtempSync(join(tmpdir(), 'rh-breakdown-'))
  const forgetBuildDir = onInterrupt(() => rmSync(workDir, { recursive: true, force: true }))
  try {
    const bundles = await buildBundles(workDir)
    const variants = allVariants()
      .filter((variant) => !variant.targets || variant.targets.includes(options.target))
      .filter((variant) => variant.name === 'baseline' || variant.name === 'bare' || options.only.length === 0 || options.only.includes(variant.name))
    const runs = new Map<string, VariantResult[]>()
    for (let round = 1; round <= options.rounds; round++) {
      for (const variant of variants) {
        await waitForIdle(5)
        const result = await measureVariant(bundles, variant, workDir, options)
        runs.set(variant.name, [...(runs.get(variant.name) ?? []), result])
        const row = result.throughput
        console.log(
          `round ${round} ${variant.name.padEnd(20)} ${result.error && !row ? `ERROR ${result.error}` : `${row!.rps.toFixed(0).padStart(6)} req/s  ${result.cpuMsPerRequest!.toFixed(3)} ms all-in cpu/req  p50 ${result.latency?.latency.p50.toFixed(2) ?? '-'} ms  p99 ${result.latency?.latency.p99.toFixed(2) ?? '-'} ms  other cpu ${row!.cpu.other.toFixed(2)}${result.error ? `  (${result.error})` : ''}`}`,
        )
      }
    }
    const results = variants.map((variant) => {
      const all = runs.get(variant.name) ?? []
      const best = [...all].filter((run) => run.throughput).sort((a, b) => b.throughput!.rps - a.throughput!.rps)[0] ?? all[0]!
      return { ...best, rounds: all.map((run) => ({ rps: run.throughput?.rps ?? null, cpuMsPerRequest: run.cpuMsPerRequest ?? null, otherCpu: run.throughput?.cpu.other ?? null })) }
    })
    printSummary(results, options)
    return results
  } finally {
    rmSync(workDir, { recursive: true, force: true })
    forgetBuildDir()
  }
}

function printSummary(results: readonly VariantResult[], options: BreakdownOptions): void {
  const baseline = results.find((result) => result.name === 'baseline')
  if (!baseline?.throughput || baseline.cpuMsPerRequest === undefined) return
  const bareRps = results.find((result) => result.name === 'bare')?.throughput?.rps ?? Number.NaN
  console.log(`\n/score (${options.target}) variants — ${options.connections} connections ${options.durationS} s, 1 connection ${options.latencyS} s, storage ${options.storage}, best of ${options.rounds} round(s)`)
  console.log('all-in ms = workerd CPU per 2xx /score including the background work it caused (queue consumer, waitUntil); window ms = during the load only')
  console.log(`${'variant'.padEnd(20)}${'req/s'.padStart(8)}${'×base'.padStart(7)}${'÷bare'.padStart(7)}${'window ms'.padStart(11)}${'all-in ms'.padStart(11)}${'saved ms'.padStart(10)}${'p99 64c'.padStart(9)}${'p50 1c'.padStart(8)}${'p99 1c'.padStart(8)}${'d1 rows'.padStart(9)}${'other'.padStart(7)}  what changed`)
  for (const result of results) {
    if (!result.throughput || result.cpuMsPerRequest === undefined) {
      console.log(`${result.name.padEnd(20)}  ${result.error ?? 'no data'}`)
      continue
    }
    const saved = baseline.cpuMsPerRequest - result.cpuMsPerRequest
    console.log(
      `${result.name.padEnd(20)}${result.throughput.rps.toFixed(0).padStart(8)}${(result.throughput.rps / baseline.throughput.rps).toFixed(2).padStart(7)}${(result.throughput.rps / bareRps).toFixed(2).padStart(7)}${(result.windowCpuMsPerRequest ?? Number.NaN).toFixed(3).padStart(11)}${result.cpuMsPerRequest.toFixed(3).padStart(11)}${saved.toFixed(3).padStart(10)}${result.throughput.latency.p99.toFixed(0).padStart(9)}${(result.latency?.latency.p50.toFixed(2) ?? '-').padStart(8)}${(result.latency?.latency.p99.toFixed(2) ?? '-').padStart(8)}${String(result.d1Rows ?? '-').padStart(9)}${result.throughput.cpu.other.toFixed(2).padStart(7)}  ${result.description}${result.error ? ` (${result.error})` : ''}`,
    )
  }
}

if (process.argv[1]?.endsWith('score-breakdown.ts')) {
  const { values } = parseArgs({
    options: {
      target: { type: 'string' }, duration: { type: 'string' }, warmup: { type: 'string' }, latency: { type: 'string' },
      connections: { type: 'string' }, storage: { type: 'string' }, only: { type: 'string' }, out: { type: 'string' }, rounds: { type: 'string' },
    },
  })
  const options: BreakdownOptions = {
    target: (values.target ?? 'mock') as BreakdownOptions['target'],
    durationS: Number(values.duration ?? 6),
    warmupS: Number(values.warmup ?? 2),
    latencyS: Number(values.latency ?? 3),
    connections: Number(values.connections ?? 64),
    storage: (values.storage ?? 'memory') as StorageKind,
    only: values.only ? values.only.split(',') : [],
    rounds: Math.max(1, Number(values.rounds ?? 2)),
  }
  const out = values.out ?? join(ROOT, `bench/results/score-breakdown-${options.target}.json`)
  runBreakdown(options)
    .then((results) => {
      mkdirSync(dirname(out), { recursive: true })
      writeFileSync(out, `${JSON.stringify({ command: `npx tsx bench/score-breakdown.ts ${process.argv.slice(2).join(' ')}`.trim(), at: new Date().toISOString(), options, results }, null, 2)}\n`)
      console.log(`\nJSON: ${out}`)
    })
    .catch((error: unknown) => {
      console.error(error)
      process.exit(1)
    })
}
