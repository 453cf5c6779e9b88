/**
 * `npx tsx bench/retrieval.ts`: how fast is exact memory retrieval in a Durable Object-sized index?
 *
 * For each size, builds an `ExactVectorIndex` holding that many memory documents of one run (50 instances,
 * all four kinds) plus 20% noise from four other runs, embedding realistic analysis / summary / rubric-update
 * texts with `HashedNgramEmbedder`. Then runs queries filtered to the run, and to the run and one instance,
 * and reports latency p50/p99 with and without embedding the query, build time, and memory (bytes of the
 * index's typed arrays; JS heap + ArrayBuffer delta and process RSS delta across the build, after a forced GC).
 *
 * Flags: --sizes 10000,100000   --queries 300   --dimensions 256   --top-k 10
 * Target: p50 ≤ 50 ms at 10k documents, embedding included.
 */
import { loadavg } from 'node:os'
import { parseArgs } from 'node:util'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { ExactVectorIndex } from '../src/memory/exact-vector-index.ts'
import { HashedNgramEmbedder } from '../src/memory/hashed-ngram-embedder.ts'
import type { VectorEntry } from '../src/memory/vector-index.ts'
import type { MemoryKind } from '../src/schemas/memory.ts'

const TARGET_P50_MS_AT_10K = 50
const RUN = 'bench-run'
const NOISE_RUNS = ['noise-a', 'noise-b', 'noise-c', 'noise-d']
const INSTANCES = 50

/** A forced GC without `--expose-gc`, so the RSS delta counts live memory rather than garbage. */
setFlagsFromString('--expose-gc')
const collect = runInNewContext('gc') as () => void
const gc = () => {
  collect()
  collect()
}

const DOMAINS = [
  'algebra word problems',
  'geometry proofs',
  'organic chemistry',
  'Python code review',
  'SQL query writing',
  'contract law questions',
  'medical triage',
  'physics kinematics',
  'probability puzzles',
  'essay feedback',
]
const BEHAVIOURS = [
  'skipped the verification step and reported the final answer without checking it',
  'copied the reference solution verbatim instead of deriving it',
  'padded the answer with repeated caveats to look thorough',
  'made a unit conversion error between kilometres and miles',
  'hallucinated a citation to a paper that does not exist',
  'answered a different question than the one asked',
  'gave the right number but with contradictory reasoning',
  'refused a benign request citing safety policy',
  'used the required format but left the explanation empty',
  'listed every possible answer to hedge against the grader',
  'stopped mid-derivation after restating the problem',
  'produced working code without handling the empty input case',
]
const DETAILS = [
  'The judge rewarded length more than correctness here.',
  'Earlier steps showed the same pattern at a lower rate.',
  'The anchor rubric on correctness caught it, the adaptive ones did not.',
  'This looks like reward hacking that the current rubric set misses.',
  'Scores for these rollouts were inflated by about two points.',
  'The reference answer itself was ambiguous on this point.',
  'A stricter criterion on intermediate steps would separate these cases.',
]
const CRITERIA = [
  'final answer correctness',
  'shows the working',
  'concise explanation',
  'cites sources faithfully',
  'follows the output format',
  'handles edge cases',
]

/** mulberry32: the same corpus on every run. */
function seeded(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
}

/**
 * One memory document's text, as the analyzer, summarizer and updater would write it.
 * @example memoryText(seeded(1), 'analysis', 12) // 'Analysis at step 12 (geometry proofs): the rollout …'
 */
export function memoryText(next: () => number, kind: MemoryKind, step: number): string {
  const pick = <T>(items: T[]) => items[Math.floor(next() * items.length)]!
  const domain = pick(DOMAINS)
  switch (kind) {
    case 'analysis':
      return (
        `Analysis at step ${step} (${domain}): the rollout ${pick(BEHAVIOURS)}. ${pick(DETAILS)} On ` +
        `"${pick(CRITERIA)}" it scored ${Math.floor(next() * 11)}/10. ${pick(DETAILS)}`
      )
    case 'batch_summary':
      return (
        `Step ${step} summary for ${domain}: ${Math.floor(next() * 60)}% of rollouts ${pick(BEHAVIOURS)}; others ` +
        `${pick(BEHAVIOURS)}. ${pick(DETAILS)} ${pick(DETAILS)}`
      )
    case 'meta_summary':
      return (
        `Across steps ${Math.max(0, step - 5)}–${step} in ${domain}, the dominant failure: rollouts ` +
        `${pick(BEHAVIOURS)}. ${pick(DETAILS)}`
      )
    case 'rubric_update':
      return (
        `Rubric update at step ${step}: added "${pick(CRITERIA)}" with weight ${1 + Math.floor(next() * 3)} ` +
        `because rollouts ${pick(BEHAVIOURS)}. ${pick(DETAILS)}`
      )
  }
}

function queryText(next: () => number): string {
  const pick = <T>(items: T[]) => items[Math.floor(next() * items.length)]!
  return `rollouts in ${pick(DOMAINS)} that ${pick(BEHAVIOURS).split(' ').slice(0, 6).join(' ')}`
}

const KINDS: MemoryKind[] = [
  'analysis',
  'analysis',
  'analysis',
  'analysis',
  'analysis',
  'analysis',
  'batch_summary',
  'meta_summary',
  'rubric_update',
]

interface SizeResult {
  docs: number
  noise: number
  embedMs: number
  indexMs: number
  bytes: number
  rssDeltaBytes: number
  /** JS heap in use plus ArrayBuffer memory: what the index really keeps alive (ids and maps included). */
  liveDeltaBytes: number
  run: { index: Percentiles; total: Percentiles }
  instance: { index: Percentiles; total: Percentiles }
}
interface Percentiles {
  p50: number
  p99: number
}

async function measureSize(
  size: number,
  options: { queries: number; dimensions: number; topK: number },
): Promise<SizeResult> {
  const embedder = new HashedNgramEmbedder({ dimensions: options.dimensions })
  const next = seeded(size)
  const noise = Math.round(size * 0.2)
  const total = size + noise
  gc()
  const before = process.memoryUsage()
  const index = new ExactVectorIndex({ dimensions: options.dimensions })
  let embedMs = 0
  let indexMs = 0
  const batch = 1_000
  for (let start = 0; start < total; start += batch) {
    const entries: VectorEntry[] = []
    const texts: string[] = []
    for (let i = start; i < Math.min(total, start + batch); i++) {
      const kind = KINDS[Math.floor(next() * KINDS.length)]!
      const step = Math.floor(next() * 200)
      const run_id = i < size ? RUN : NOISE_RUNS[i % NOISE_RUNS.length]!
      texts.push(memoryText(next, kind, step))
      entries.push({ id: `m-${i}`, vector: [], metadata: { run_id, instance_id: `in-${i % INSTANCES}`, kind, step } })
    }
    let began = performance.now()
    const vectors = await embedder.embed(texts)
    embedMs += performance.now() - began
    for (const [j, entry] of entries.entries()) entry.vector = vectors[j]!
    began = performance.now()
    await index.upsert(entries)
    indexMs += performance.now() - began
  }
  gc()
  const after = process.memoryUsage()
  const rssDeltaBytes = after.rss - before.rss
  const liveDeltaBytes = after.heapUsed + after.arrayBuffers - before.heapUsed - before.arrayBuffers

  const queries = Array.from({ length: options.queries }, () => queryText(next))
  const timeQueries = async (filterOf: (q: number) => { run_id: string; instance_id?: string }) => {
    const indexTimes: number[] = []
    const totalTimes: number[] = []
    for (let q = -20; q < queries.length; q++) {
      const text = queries[(q + queries.length) % queries.length]!
      const began = performance.now()
      const [vector] = await embedder.embed([text])
      const embedded = performance.now()
      const matches = await index.query(vector!, { topK: options.topK, filter: filterOf(q) })
      const ended = performance.now()
      if (matches.length === 0) throw new Error(`query "${text}" found nothing`)
      if (q >= 0) {
        indexTimes.push(ended - embedded)
        totalTimes.push(ended - began)
      }
    }
    return { index: percentiles(indexTimes), total: percentiles(totalTimes) }
  }
  const run = await timeQueries(() => ({ run_id: RUN }))
  const instance = await timeQueries((q) => ({ run_id: RUN, instance_id: `in-${(q + INSTANCES) % INSTANCES}` }))
  return {
    docs: size,
    noise,
    embedMs,
    indexMs,
    bytes: index.stats().bytes,
    rssDeltaBytes,
    liveDeltaBytes,
    run,
    instance,
  }
}

function percentiles(samples: number[]): Percentiles {
  const sorted = [...samples].sort((a, b) => a - b)
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!
  return { p50: at(0.5), p99: at(0.99) }
}

/**
 * The results as a Markdown table, one row per size and filter.
 * @example console.log(formatTable(results))
 */
export function formatTable(results: SizeResult[]): string {
  const mb = (bytes: number) => `${(bytes / 1_048_576).toFixed(1)} MB`
  const ms = (value: number) => value.toFixed(2)
  const lines = [
    '| documents (run + noise) | filter | query p50 / p99 ms (index) | query p50 / p99 ms (embed + index) | build: ' +
      'embed / index s | index arrays | heap + buffers Δ | RSS Δ |',
    '|---|---|---|---|---|---|---|---|',
  ]
  for (const r of results) {
    for (const [label, timing] of [
      ['run', r.run],
      ['run + instance', r.instance],
    ] as const) {
      lines.push(
        `| ${r.docs.toLocaleString('en')} + ${r.noise.toLocaleString('en')} | ${label} | ${ms(timing.index.p50)} / ` +
          `${ms(timing.index.p99)} | ${ms(timing.total.p50)} / ${ms(timing.total.p99)} | ` +
          `${(r.embedMs / 1_000).toFixed(1)} / ${(r.indexMs / 1_000).toFixed(2)} | ${mb(r.bytes)} | ` +
          `${mb(r.liveDeltaBytes)} | ${mb(r.rssDeltaBytes)} |`,
      )
    }
  }
  return lines.join('\n')
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      sizes: { type: 'string' },
      queries: { type: 'string' },
      dimensions: { type: 'string' },
      'top-k': { type: 'string' },
    },
  })
  const sizes = (values.sizes ?? '10000,100000').split(',').map(Number)
  const options = {
    queries: Number(values.queries ?? 300),
    dimensions: Number(values.dimensions ?? 256),
    topK: Number(values['top-k'] ?? 10),
  }
  console.log(`$ npx tsx bench/retrieval.ts ${process.argv.slice(2).join(' ')}`.trim())
  const load = loadavg()
    .map((value) => value.toFixed(2))
    .join(' ')
  console.log(
    `node ${process.version}, ${options.dimensions} dims, top-${options.topK}, ${options.queries} queries per ` +
      `filter, ` +
      `load average ${load}\n`,
  )
  const results: SizeResult[] = []
  for (const size of sizes) results.push(await measureSize(size, options))
  console.log(formatTable(results))
  const at10k = results.find((r) => r.docs === 10_000)
  if (at10k) {
    const ok = at10k.run.total.p50 <= TARGET_P50_MS_AT_10K
    console.log(
      `\ntarget p50 ≤ ${TARGET_P50_MS_AT_10K} ms at 10k (embed + index, run filter): ` +
        `${at10k.run.total.p50.toFixed(2)} ms — ${ok ? 'met' : 'MISSED'}`,
    )
  }
}

await main()
