/**
 * `npx tsx bench/regex-budget.ts [--pattern '(.*a){19}'] [--fill 'a '] [--chars 100000] [--warmup 5] [--timeout-s 120]`
 * `npx tsx bench/regex-budget.ts --search 300 [--search-chars 10000]`
 *
 * The cost of a third-party extraction pattern at the edge (issues 39 and 46, item 1): the built Worker on Miniflare
 * alone (`npm run serve`'s server, on a fresh state in a temporary directory), an artifact whose `runtime.extraction`
 * is a regex (mock backend, one vote) uploaded and deployed, then one `/rm/<target>/score` of a `--chars` prompt made
 * of `--fill` repeated (`a ` by default: what a pattern of `.*a` repeats works hardest on; `x` for `x(.*y)?`), while
 * `/healthz` is asked every 10 ms. Prints one JSON line: whether the upload was accepted, the score's time, and the
 * slowest `/healthz`. The default pattern is the costliest shape the budget accepts (`MAX_PATTERN_INSTRUCTIONS`); pass
 * `--pattern '(.*a){1000}'` for issue 39's.
 *
 * `--search N` looks for the worst pattern instead, in this process: N patterns the import accepts, drawn by fast-check
 * (tests/support/patterns.ts), each extracted from every text of `--search-chars` made to keep it busy (its literal
 * characters repeated, English prose); prints the five slowest with their texts, one JSON line each.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import fc from 'fast-check'
import { artifactId, RmArtifactBody } from '../src/schemas/artifact.ts'
import { extractRegex } from '../src/search/roles/extraction.ts'
import { acceptedPattern, adversarialTexts } from '../tests/support/patterns.ts'
import { buildWorker, serveWorker } from '../offline/dev/serve.ts'
import { applyLocalMigrations, freePort } from '../offline/dev/start.ts'

const ADMIN = 'bench-regex-admin-token'
const TARGET = 'bench-regex'

const { values } = parseArgs({
  options: {
    pattern: { type: 'string', default: '(.*a){19}' },
    fill: { type: 'string', default: 'a ' },
    chars: { type: 'string', default: '100000' },
    warmup: { type: 'string', default: '5' },
    search: { type: 'string' },
    'search-chars': { type: 'string', default: '10000' },
    'timeout-s': { type: 'string', default: '120' },
  },
})
const pattern = values.pattern
const chars = Number(values.chars)
const warmups = Math.max(1, Number(values.warmup))
const timeoutMs = Number(values['timeout-s']) * 1_000

/** The slowest accepted patterns of `count` drawn, each on its busiest text of `searchChars`. */
function searchWorst(count: number, searchChars: number): void {
  const timed: { pattern: string; fill: string; ms: number }[] = []
  for (const candidate of fc.sample(acceptedPattern(), { numRuns: count, seed: 46 })) {
    for (const text of adversarialTexts(candidate, searchChars)) {
      const started = performance.now()
      extractRegex(text, candidate)
      timed.push({ pattern: candidate, fill: text.slice(0, 12), ms: performance.now() - started })
    }
  }
  timed.sort((a, b) => b.ms - a.ms)
  for (const { pattern: worst, fill, ms } of timed.slice(0, 5))
    console.log(JSON.stringify({ pattern: worst, fill, chars: searchChars, extract_ms: Math.round(ms) }))
}

if (values.search !== undefined) {
  searchWorst(Number(values.search), Number(values['search-chars']))
  process.exit(0)
}

/** A mock-backend artifact that extracts the prompt with `pattern`. */
async function artifactWith(extractionPattern: string) {
  const criterion = (id: string) => ({
    criterion_id: id,
    text: 'Answers the question asked.',
    weight: 1,
    criterion_type: null,
    check_points: [],
    positive_examples: [],
    negative_examples: [],
  })
  const body = RmArtifactBody.parse({
    schema_version: '1.0',
    kind: 'rubric',
    created_at_utc: '2026-01-01T00:00:00.000Z',
    provenance: {
      source_run_id: 'bench-regex',
      source_session_id: 'bench-regex',
      dataset_sha256: 'a'.repeat(64),
      config_hash: 'b'.repeat(64),
      settings_hash: 'c'.repeat(64),
      search_output_sha256: 'd'.repeat(64),
    },
    rubrics: {
      __default__: {
        rubric_id: 'r_default',
        criteria: [criterion('relevant')],
        grading_protocol: { allow_na: true, num_votes: 1, grade_max: 10 },
        metadata: {},
      },
    },
    runtime: {
      backend: 'mock',
      verifier_model: 'mock-heuristic-1',
      temperature: 0,
      max_tokens: 1024,
      seed: 7,
      locale: 'en',
      extraction: { prompt: { kind: 'regex', pattern: extractionPattern }, candidate: { kind: 'answer' } },
      grade_max: 10,
      allow_na: true,
      num_votes: 1,
    },
    scoring_policy: { score: 'weighted_mean_of_grades', normalization: { method: 'identity', range: [0, 1] } },
    compatibility: { artifact_type: 'rm', min_rm_api_version: '1.0' },
  })
  return { ...body, artifact_id: await artifactId(body) }
}

/** The parts of an answer this bench reads. */
interface Answer {
  error?: unknown
}

async function post(url: string, body: unknown): Promise<{ status: number; json: Answer | undefined }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  })
  return { status: res.status, json: (await res.json().catch(() => undefined)) as Answer | undefined }
}

const state = mkdtempSync(join(tmpdir(), 'rh-regex-bench-'))
const port = await freePort()
applyLocalMigrations(state)
const mf = await serveWorker(buildWorker(), port, { persistTo: state, adminToken: ADMIN })
const base = `http://127.0.0.1:${port}`
try {
  const artifact = await artifactWith(pattern)
  const upload = await post(`${base}/admin/artifacts`, artifact)
  if (upload.status >= 300) {
    console.log(JSON.stringify({ pattern, accepted: false, status: upload.status, error: upload.json?.error }))
  } else {
    const deployed = await post(`${base}/admin/targets/${TARGET}/deployments`, { artifact_id: artifact.artifact_id })
    if (deployed.status !== 201) throw new Error(`deploy: ${deployed.status} ${JSON.stringify(deployed.json)}`)
    const prompt = values.fill.repeat(Math.ceil(chars / values.fill.length)).slice(0, chars)
    // `--warmup` scores of a 10 KB prompt of the same fill first (the deployment read, the artifact parsed, the
    // pattern compiled, its code optimised), as a serving isolate has them behind it; 1 is a cold isolate.
    for (let warm = 0; warm < warmups; warm++)
      await post(`${base}/rm/${TARGET}/score`, {
        prompt_id: 'p0',
        prompt: prompt.slice(0, 10_000),
        candidate: { candidate_id: `warm-${warm}`, text: '4' },
      })
    let scoring = true
    let slowestHealthzMs = 0
    let probes = 0
    let refused = 0
    const probe = (async () => {
      while (scoring) {
        const started = performance.now()
        // A failed probe counts with its time: one that waited for a stalled isolate is what this measures.
        const answered = await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(timeoutMs) })
          .then((res) => res.text())
          .then(() => true)
          .catch(() => false)
        if (answered) probes++
        else refused++
        slowestHealthzMs = Math.max(slowestHealthzMs, performance.now() - started)
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
    })()
    const started = performance.now()
    const scored = await post(`${base}/rm/${TARGET}/score`, {
      prompt_id: 'p1',
      prompt,
      candidate: { candidate_id: 'c1', text: 'The answer is 4.' },
    }).catch((error: Error) => ({ status: 0, json: { error: error.message } }))
    const scoreMs = performance.now() - started
    scoring = false
    await probe
    console.log(
      JSON.stringify({
        pattern,
        accepted: true,
        fill: values.fill,
        chars,
        warmups,
        score_status: scored.status,
        score_ms: Math.round(scoreMs),
        slowest_healthz_ms: Math.round(slowestHealthzMs),
        healthz_answered: probes,
        healthz_failed: refused,
      }),
    )
  }
} finally {
  await mf.dispose()
  rmSync(state, { recursive: true, force: true })
}
