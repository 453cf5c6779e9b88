/**
 * Scorers for `reward-harness bench`: each gives one scalar per (prompt, candidate), or an error for that candidate.
 * Scorers only ever see blind items (`blindItem`): prompt id and text, candidate texts under opaque ids; no labels,
 * sources or metadata. Add a scorer kind by adding a case to `parseScorerSpec` and `createScorer`.
 */
import { readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { MockChatModel } from '../../src/llm/mock.ts'
import type { ChatModel } from '../../src/llm/types.ts'
import { RmArtifact, rubricForPrompt } from '../../src/schemas/artifact.ts'
import { createLimiter } from '../../src/search/algorithms/concurrency.ts'
import {
  createSearchRoles,
  LlmVerifier,
  meanGrades,
  parseExtraction,
  parsePresetRubrics,
  rubricScore,
} from '../../src/search/roles/index.ts'
import { seededRandom, shuffle } from '../../src/hash/index.ts'
import type { Candidate, CriterionGrades, PromptItem, Verifier } from '../../src/search/types.ts'
import type { SearchRubric } from '../../src/schemas/search-rubric.ts'
import { UsageError } from '../../src/usage-error/index.ts'
import { refuseInsecureTransport } from '../edge/index.ts'

/** What a scorer gives for one candidate. */
type CandidateScore = { score: number } | { error: string }

/** A scorer: scores of every candidate of every (blind) item, in order. */
export interface BenchScorer {
  /** e.g. `mock`, `rubric:out/best.json`. */
  readonly name: string
  scoreAll(items: readonly PromptItem[]): Promise<CandidateScore[][]>
  /** The items it grades with a rubric made for that very prompt (the search's own data), when it keys by prompt. */
  ownRubricItems?(items: readonly PromptItem[]): PromptItem[]
}

/** A parsed `--scorer` value. */
export type ScorerSpec =
  | { kind: 'mock' }
  | { kind: 'rubric'; file: string }
  | { kind: 'artifact'; file: string }
  | { kind: 'url'; base: string; target?: string }
  | { kind: 'library'; dir: string }

/**
 * Parses `--scorer`: `mock`, `rubric:<file>`, `artifact:<file>`, `url:<base>[#target]`, `library:<dir>`.
 * @example parseScorerSpec('url:http://127.0.0.1:8787#prod') // { kind: 'url', base: 'http://127.0.0.1:8787', target:
 *   'prod' }
 */
export function parseScorerSpec(value: string): ScorerSpec {
  if (value === 'mock') return { kind: 'mock' }
  const colon = value.indexOf(':')
  const kind = colon === -1 ? value : value.slice(0, colon)
  const rest = colon === -1 ? '' : value.slice(colon + 1)
  const need = (what: string) => {
    if (!rest) throw new UsageError(`--scorer ${kind}: give ${what} (e.g. ${kind}:${what})`)
    return rest
  }
  switch (kind) {
    case 'rubric':
      return { kind, file: need('<file.json>') }
    case 'artifact':
      return { kind, file: need('<file.json>') }
    case 'library':
      return { kind, dir: need('<dir>') }
    case 'url': {
      const spec = need('<base url>#<target>')
      const hash = spec.indexOf('#')
      const base = (hash === -1 ? spec : spec.slice(0, hash)).replace(/\/+$/, '')
      const target = hash === -1 ? undefined : spec.slice(hash + 1)
      if (!/^https?:\/\//.test(base)) throw new UsageError(`--scorer url: expected an http(s) base URL, got "${base}"`)
      if (target !== undefined && !/^[a-z0-9][a-z0-9_-]{0,63}$/.test(target))
        throw new UsageError(`--scorer url: "${target}" is not a target name`)
      return { kind, base, ...(target === undefined ? {} : { target }) }
    }
    default:
      throw new UsageError(
        `--scorer: unknown scorer "${value}" (expected mock, rubric:<file>, artifact:<file>, url:<base>#<target> or ` +
          `library:<dir>)`,
      )
  }
}

/** Options every scorer may use. */
export interface ScorerOptions {
  concurrency: number
  seed: number
  /** The model the verifier-based scorers grade with; default MockChatModel. */
  model?: ChatModel
  /** Bearer token for `url:` (default env RM_TOKEN). */
  token?: string
  /** Items per batch_score request (≤ 100). */
  chunkSize?: number
  /** How long `url:` waits for each batch_score answer (default 300 s); then its items are failures. */
  requestTimeoutMs?: number
  fetch?: typeof fetch
  /** The dataset file: `path` images of its items are read relative to it (`library:` judges with images). */
  datasetPath?: string
  /** How `rubric:` and `artifact:` grade: one call per candidate, or one Yes/No call per criterion. */
  judging?: 'grades' | 'verdicts'
  /** Told each time candidates have their score (or their failure): how many more. */
  onScored?: (candidates: number) => void
}

/** The verifier's judging, when the options name one. */
const judgingOf = (options: ScorerOptions) => (options.judging ? { judging: options.judging } : {})

/**
 * The scorer a spec names (`library:<dir>`: see `libraryScorer`).
 * @example const scorer = await createScorer({ kind: 'mock' }, { concurrency: 4, seed: 0 })
 */
export async function createScorer(spec: ScorerSpec, options: ScorerOptions): Promise<BenchScorer> {
  switch (spec.kind) {
    case 'mock': {
      const model = options.model ?? new MockChatModel()
      return {
        name: options.model ? `mock (initial rubrics and grades by ${model.id})` : 'mock',
        async scoreAll(items) {
          const roles = createSearchRoles({ backend: options.model ? 'llm' : 'mock', dataset: [...items], model })
          const rubrics = new Map<string, Promise<SearchRubric>>()
          const rubricFor = (item: PromptItem) => {
            let rubric = rubrics.get(item.prompt_id)
            if (!rubric)
              rubrics.set(item.prompt_id, (rubric = roles.initializer.initialize(item, { seed: options.seed })))
            return rubric
          }
          return verifierScores(items, roles.verifier, async (item) => ({ rubric: await rubricFor(item) }), options)
        },
      }
    }
    case 'rubric': {
      const raw = await readJson(spec.file, '--scorer rubric')
      let rubrics: Map<string, SearchRubric>
      try {
        rubrics = parsePresetRubrics(raw)
      } catch (error) {
        throw new UsageError(`--scorer rubric: ${spec.file}: ${error instanceof Error ? error.message : String(error)}`)
      }
      if (rubrics.size === 0) throw new UsageError(`--scorer rubric: ${spec.file} has no rubric`)
      const verifier = new LlmVerifier(options.model ?? new MockChatModel(), { locale: 'en', ...judgingOf(options) })
      return {
        name: `rubric:${spec.file}`,
        ownRubricItems: (items) =>
          items.filter((item) => item.prompt_id !== '__default__' && rubrics.has(item.prompt_id)),
        scoreAll: (items) =>
          verifierScores(
            items,
            verifier,
            async (item) => {
              const rubric = rubrics.get(item.prompt_id) ?? rubrics.get('__default__')
              return rubric ? { rubric } : { error: `no rubric for prompt "${item.prompt_id}" and no __default__` }
            },
            options,
          ),
      }
    }
    case 'artifact':
      return artifactScorer(spec.file, options)
    case 'url':
      return urlScorer(spec, options)
    case 'library':
      return libraryScorer(spec.dir, options)
  }
}

/**
 * A `library:<dir>` scorer: the scorer plus the judgments that failed (counted apart, never read as ties).
 * @internal
 */
export interface LibraryBenchScorer extends BenchScorer {
  readonly stats: { judgments: number; failures: number }
}

/** The judge library in `dir`, or a usage error saying how to make one. */
async function openJudgeLibrary(dir: string) {
  const { loadLibrary } = await import('../library/index.ts')
  const hasRegistry = await stat(join(dir, 'registry.json')).then(
    (s) => s.isFile(),
    () => false,
  )
  if (!hasRegistry) {
    throw new UsageError(
      `--scorer library:${dir}: ${dir} is not a judge library (no registry.json): ` +
        'run `reward-harness evolve --out <run>` and use library:<run>/checkpoints/best',
    )
  }
  try {
    return await loadLibrary(dir)
  } catch (error) {
    throw new UsageError(`--scorer library:${dir}: ${messageOf(error)}`)
  }
}

/** `artifact:<file>`: the RM artifact's rubric for each prompt (its `__default__` where it has none). */
async function artifactScorer(file: string, options: ScorerOptions): Promise<BenchScorer> {
  const parsed = RmArtifact.safeParse(await readJson(file, '--scorer artifact'))
  if (!parsed.success)
    throw new UsageError(`--scorer artifact: ${file} is not an RM artifact: ${parsed.error.issues[0]?.message ?? ''}`)
  const artifact = parsed.data
  const verifier = new LlmVerifier(options.model ?? new MockChatModel(), {
    locale: artifact.runtime.locale,
    extraction: parseExtraction(artifact.runtime.extraction),
    // The artifact's own judging unless --judging says otherwise: it scores as /rm serves it.
    ...(artifact.runtime.judging ? { judging: artifact.runtime.judging } : {}),
    ...judgingOf(options),
  })
  return {
    name: `artifact:${file}`,
    ownRubricItems: (items) => items.filter((item) => rubricForPrompt(artifact, item.prompt_id)?.fallback === false),
    scoreAll: (items) =>
      verifierScores(
        items,
        verifier,
        async (item) => {
          const found = rubricForPrompt(artifact, item.prompt_id)
          return found
            ? { rubric: found.rubric }
            : { error: `the artifact has no rubric for prompt "${item.prompt_id}" and no __default__` }
        },
        options,
      ),
  }
}

/**
 * `library:<dir>`: the judge library in `dir` (offline/library; e.g. `<evolve out>/checkpoints/best`) judges every
 * pair of candidates of an item with its Router + Sub-Agent (src/evolve/judge.ts) in BOTH orders. A candidate's score
 * is its win rate over the judged orders of all its pairs (win 1, tie 0.5, loss 0). A failed judgment is counted in
 * `stats.failures` and left out — never a tie; a candidate none of whose judgments succeeded gets an error.
 * @example const scorer = await libraryScorer('runs/a/checkpoints/best', { concurrency: 4, seed: 0 })
 * @internal
 */
export async function libraryScorer(dir: string, options: ScorerOptions): Promise<LibraryBenchScorer> {
  const { judgeWithLibrary, LibraryRouter, OUTCOME_VALUE } = await import('../../src/evolve/judge.ts')
  const { ImageRegistry, itemImages } = await import('../../src/evolve/images.ts')
  const { datasetImageRegistry } = await import('../evolve/images.ts')
  const library = await openJudgeLibrary(dir)
  const model = options.model ?? new MockChatModel()
  const router = new LibraryRouter(model)
  const stats = { judgments: 0, failures: 0 }
  const limit = createLimiter(Math.max(1, options.concurrency))
  const registry = options.datasetPath ? datasetImageRegistry(options.datasetPath) : new ImageRegistry()
  return {
    name: `library:${dir}`,
    stats,
    async scoreAll(items) {
      return Promise.all(
        items.map(async (item): Promise<CandidateScore[]> => {
          const n = item.candidates.length
          if (n < 2) {
            options.onScored?.(n)
            return item.candidates.map(() => ({ error: PAIRWISE_ONLY }))
          }
          const tally = new WinRateTally(n)
          let routed: string[]
          try {
            routed = await router.route(library, item.prompt)
          } catch {
            routed = []
          }
          const shared = {
            instruction: item.prompt,
            ...(item.reference === undefined ? {} : { reference: item.reference }),
          }
          const jobs: Array<[number, number]> = []
          for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) if (i !== j) jobs.push([i, j])
          await Promise.all(
            jobs.map(([a, b]) =>
              limit(async () => {
                const [first, second] = [item.candidates[a]!, item.candidates[b]!]
                const images = itemImages(registry, item.metadata, first.metadata, second.metadata)
                const outcome = await judgeWithLibrary(
                  model,
                  library,
                  routed,
                  { ...shared, first: first.text, second: second.text, ...(images ? { images } : {}) },
                  { images: registry },
                )
                stats.judgments++
                if (!outcome.ok) {
                  stats.failures++
                  return tally.failed(a, b, outcome.failure)
                }
                tally.judged(
                  a,
                  b,
                  OUTCOME_VALUE[outcome.preference === 'tie' ? 'tie' : outcome.preference === 'A' ? 'win' : 'loss'],
                )
              }),
            ),
          )
          options.onScored?.(n)
          return tally.scores((failures) => `every library judgment of this candidate failed (${failures.length})`)
        }),
      )
    },
  }
}

/**
 * Grades every candidate with `verifier` (the rubric's number of votes, mean grades, rubricScore); errors per
 * candidate.
 */
async function verifierScores(
  items: readonly PromptItem[],
  verifier: Verifier,
  rubricOf: (item: PromptItem) => Promise<{ rubric: SearchRubric } | { error: string }>,
  options: ScorerOptions,
): Promise<CandidateScore[][]> {
  const limit = createLimiter(Math.max(1, options.concurrency))
  return Promise.all(
    items.map(async (item) => {
      let found: { rubric: SearchRubric } | { error: string }
      try {
        found = await rubricOf(item)
      } catch (error) {
        found = { error: `no rubric: ${messageOf(error)}` }
      }
      if ('error' in found) return item.candidates.map(() => ({ error: found.error }) as CandidateScore)
      const { rubric } = found
      return Promise.all(
        item.candidates.map((candidate) =>
          limit(async (): Promise<CandidateScore> => {
            try {
              const votes: CriterionGrades[] = []
              for (let vote = 0; vote < rubric.grading_protocol.num_votes; vote++)
                votes.push(await verifier.grade({ item, candidate, rubric, vote, seed: options.seed + vote }))
              return { score: rubricScore(meanGrades(votes, rubric), rubric).score }
            } catch (error) {
              return { error: messageOf(error) }
            } finally {
              options.onScored?.(1)
            }
          }),
        ),
      )
    }),
  )
}

/**
 * The edge's `POST /rm/<target>/batch_score`, in chunks of ≤ 100 items; failed items (or chunks) are errors per
 * candidate. A rubric target scores each candidate. A library target (its `/healthz` says `artifact_kind: "library"`)
 * is pairwise: each pair of an item's candidates is sent once, one as the candidate and the other as the reference,
 * with their images; the edge judges both orders, and each candidate's score is its win rate over the judged orders
 * of all its pairs, as `library:<dir>` computes it offline.
 */
function urlScorer(spec: { base: string; target?: string }, options: ScorerOptions): BenchScorer {
  const root = spec.target === undefined ? spec.base : `${spec.base}/rm/${spec.target}`
  const chunkSize = Math.min(100, Math.max(1, options.chunkSize ?? 100))
  const doFetch = options.fetch ?? fetch
  const token = options.token ?? process.env.RM_TOKEN
  if (token !== undefined) refuseInsecureTransport(spec.base, process.env, 'the RM token')
  const timeoutMs = options.requestTimeoutMs ?? 300_000
  const post = async (bodies: readonly unknown[]): Promise<EdgeResult[]> => {
    const { chunks, tooLarge } = chunkBodies(bodies, chunkSize)
    const limit = createLimiter(Math.max(1, Math.min(options.concurrency, 8)))
    const answered = await Promise.all(
      chunks.map((chunk) =>
        limit(() =>
          postChunk(
            doFetch,
            `${root}/batch_score`,
            token,
            chunk.map(({ body }) => body),
            timeoutMs,
          ),
        ),
      ),
    )
    const results: EdgeResult[] = bodies.map((_, index) =>
      tooLarge.has(index)
        ? {
            error:
              `the item alone is ${tooLarge.get(index)} bytes, over the edge's 1 MiB body limit (send large ` +
              `images by url)`,
          }
        : { error: 'not sent' },
    )
    for (const [index, chunk] of chunks.entries()) {
      for (const [at, { position }] of chunk.entries()) results[position] = answered[index]![at]!
    }
    return results
  }
  return {
    name: `url:${spec.base}${spec.target === undefined ? '' : `#${spec.target}`}`,
    async scoreAll(items) {
      const kind = await artifactKind(doFetch, root, token)
      if (typeof kind === 'object') return items.map((item) => item.candidates.map(() => kind))
      if (kind === 'library') return libraryWinRates(items, post, options.datasetPath)
      const flat = items.flatMap((item) =>
        item.candidates.map((candidate) => ({
          prompt_id: item.prompt_id,
          prompt: item.prompt,
          candidate: { candidate_id: candidate.candidate_id, text: candidate.text },
        })),
      )
      const scores = await post(flat)
      options.onScored?.(flat.length)
      let next = 0
      return items.map((item) => item.candidates.map(() => scoreOf(scores[next++]!)))
    },
  }
}

/** One item's result from `batch_score`: the edge's result object, or why there is none. */
type EdgeResult = { ok: true; score: number; orders?: unknown } | { error: string }

function scoreOf(result: EdgeResult): CandidateScore {
  return 'error' in result ? result : { score: result.score }
}

const HEALTHZ_TIMEOUT_MS = 10_000
/** What one batch_score body may hold: the edge's 1 MiB limit less room for the `{"items":[…]}` wrapper. */
const MAX_CHUNK_BYTES = 1024 * 1024 - 1024

/**
 * Bodies in chunks of at most `maxItems` and `MAX_CHUNK_BYTES`; a body too large on its own is left out, with its size.
 */
function chunkBodies(
  bodies: readonly unknown[],
  maxItems: number,
): { chunks: { position: number; body: unknown }[][]; tooLarge: Map<number, number> } {
  const chunks: { position: number; body: unknown }[][] = []
  const tooLarge = new Map<number, number>()
  let current: { position: number; body: unknown }[] = []
  let bytes = 0
  for (const [position, body] of bodies.entries()) {
    const size = Buffer.byteLength(JSON.stringify(body)) + 1
    if (size > MAX_CHUNK_BYTES) {
      tooLarge.set(position, size)
      continue
    }
    if (current.length >= maxItems || bytes + size > MAX_CHUNK_BYTES) {
      chunks.push(current)
      current = []
      bytes = 0
    }
    current.push({ position, body })
    bytes += size
  }
  if (current.length > 0) chunks.push(current)
  return { chunks, tooLarge }
}

/**
 * The kind of the target's active artifact from its `/healthz`: undefined when it does not say (an edge from before
 * library artifacts, or no such route: 404), an error to report for every candidate when the target cannot be read
 * (nothing deployed there: 404 `target_not_found`).
 */
async function artifactKind(
  doFetch: typeof fetch,
  root: string,
  token: string | undefined,
): Promise<string | undefined | { error: string }> {
  let response: Response
  try {
    response = await doFetch(`${root}/healthz`, {
      headers: token ? { authorization: `Bearer ${token}` } : {},
      signal: AbortSignal.timeout(HEALTHZ_TIMEOUT_MS),
    })
  } catch (error) {
    return {
      error:
        `${root}/healthz: ` +
        `${timedOut(error) ? `no answer within ${HEALTHZ_TIMEOUT_MS / 1_000} s` : messageOf(error)}`,
    }
  }
  const text = await response.text().catch(() => '')
  // A 404 from an edge without the route says nothing; a 404 for the target itself means nothing serves there.
  if (response.status === 404 && !text.includes('"target_not_found"')) return undefined
  if (!response.ok) return { error: `${root}/healthz: HTTP ${response.status}: ${text.slice(0, 200)}` }
  try {
    const body = JSON.parse(text) as { artifact_kind?: unknown }
    return typeof body.artifact_kind === 'string' ? body.artifact_kind : undefined
  } catch {
    return { error: `${root}/healthz: the reply is not JSON` }
  }
}

const timedOut = (error: unknown) => error instanceof DOMException && error.name === 'TimeoutError'

/** Every pair of each item's candidates sent once to a library target; win rates over the judged orders. */
async function libraryWinRates(
  items: readonly PromptItem[],
  post: (bodies: readonly unknown[]) => Promise<EdgeResult[]>,
  datasetPath: string | undefined,
): Promise<CandidateScore[][]> {
  const { ImageRegistry } = await import('../../src/evolve/images.ts')
  const { OUTCOME_VALUE } = await import('../../src/evolve/judge.ts')
  const { datasetImageRegistry } = await import('../evolve/images.ts')
  const registry = datasetPath ? datasetImageRegistry(datasetPath) : new ImageRegistry()
  const imagesOf = async (metadata: Record<string, unknown>) => {
    const refs = Array.isArray(metadata.images) ? (metadata.images as Parameters<typeof registry.add>[0][]) : []
    const urls = await Promise.all(refs.map(async (ref) => (await registry.resolve(registry.add(ref))).url))
    return urls.map((url) => (url.startsWith('data:') ? { data_url: url } : { url }))
  }
  const pairs: Array<{ item: number; a: number; b: number; body: unknown }> = []
  const unusable = new Map<number, string>()
  for (const [index, item] of items.entries()) {
    let promptImages: unknown[]
    let candidateImages: unknown[][]
    try {
      promptImages = await imagesOf(item.metadata)
      candidateImages = await Promise.all(item.candidates.map((candidate) => imagesOf(candidate.metadata)))
    } catch (error) {
      unusable.set(index, messageOf(error))
      continue
    }
    const withImages = (key: string, images: unknown[]) => (images.length ? { [key]: images } : {})
    for (let a = 0; a < item.candidates.length; a++) {
      for (let b = a + 1; b < item.candidates.length; b++) {
        const [candidate, reference] = [item.candidates[a]!, item.candidates[b]!]
        pairs.push({
          item: index,
          a,
          b,
          body: {
            prompt_id: item.prompt_id,
            prompt: item.prompt,
            ...withImages('images', promptImages),
            reference: reference.text,
            ...withImages('reference_images', candidateImages[b]!),
            candidate: {
              candidate_id: candidate.candidate_id,
              text: candidate.text,
              ...withImages('images', candidateImages[a]!),
            },
          },
        })
      }
    }
  }
  const results = await post(pairs.map((pair) => pair.body))
  const tallies = items.map((item) => new WinRateTally(item.candidates.length))
  for (const [index, pair] of pairs.entries()) {
    const result = results[index]!
    const tally = tallies[pair.item]!
    const orders =
      'error' in result || !Array.isArray(result.orders) ? [] : (result.orders as Array<{ outcome?: unknown }>)
    const values = orders.flatMap((order) =>
      typeof order.outcome === 'string' && Object.hasOwn(OUTCOME_VALUE, order.outcome)
        ? [OUTCOME_VALUE[order.outcome as keyof typeof OUTCOME_VALUE]]
        : [],
    )
    if (values.length === 0) {
      tally.failed(pair.a, pair.b, 'error' in result ? result.error : 'the library judged no order of this pair')
      continue
    }
    for (const value of values) tally.judged(pair.a, pair.b, value)
  }
  return items.map((item, index) =>
    item.candidates.length < 2 || unusable.has(index)
      ? item.candidates.map(() => ({ error: unusable.get(index) ?? PAIRWISE_ONLY }))
      : tallies[index]!.scores((failures) => failures[0] ?? 'not judged'),
  )
}

const PAIRWISE_ONLY = 'the library judge is pairwise: an item needs at least two candidates'

/** An item's candidates' win rates: each judged order adds its value to one side and the rest to the other. */
class WinRateTally {
  private readonly totals: { sum: number; judged: number; failures: string[] }[]

  constructor(candidates: number) {
    this.totals = Array.from({ length: candidates }, () => ({ sum: 0, judged: 0, failures: [] }))
  }

  /** One judged order of the pair (a, b), worth `valueForA` to a. */
  judged(a: number, b: number, valueForA: number): void {
    this.totals[a]!.sum += valueForA
    this.totals[a]!.judged++
    this.totals[b]!.sum += 1 - valueForA
    this.totals[b]!.judged++
  }

  /** A judgment of the pair (a, b) that failed: counted apart, never a tie. */
  failed(a: number, b: number, why: string): void {
    this.totals[a]!.failures.push(why)
    this.totals[b]!.failures.push(why)
  }

  /** Each candidate's win rate over its judged orders; one never judged gets `errorOf` its failures. */
  scores(errorOf: (failures: string[]) => string): CandidateScore[] {
    return this.totals.map((total) =>
      total.judged === 0 ? { error: errorOf(total.failures) } : { score: total.sum / total.judged },
    )
  }
}

async function postChunk(
  doFetch: typeof fetch,
  endpoint: string,
  token: string | undefined,
  items: readonly unknown[],
  timeoutMs: number,
): Promise<EdgeResult[]> {
  const all = (error: string): EdgeResult[] => items.map(() => ({ error }))
  let response: Response
  try {
    response = await doFetch(endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify({ items }),
      signal: AbortSignal.timeout(timeoutMs),
    })
  } catch (error) {
    return all(timedOut(error) ? `no answer within ${timeoutMs / 1_000} s` : `request failed: ${messageOf(error)}`)
  }
  const text = await response.text().catch((error: unknown) => (timedOut(error) ? undefined : ''))
  if (text === undefined) return all(`no answer within ${timeoutMs / 1_000} s`)
  if (!response.ok) return all(`HTTP ${response.status}: ${text.slice(0, 200)}`)
  let body: { results?: unknown }
  try {
    body = JSON.parse(text) as { results?: unknown }
  } catch {
    return all('the reply is not JSON')
  }
  if (!Array.isArray(body.results)) return all('the reply has no results array')
  const out = all('missing from the reply')
  for (const [position, raw] of body.results.entries()) {
    const result = (typeof raw === 'object' && raw !== null ? raw : {}) as Record<string, unknown>
    const index = typeof result.index === 'number' ? result.index : position
    if (index < 0 || index >= out.length) continue
    if (result.ok === true && typeof result.score === 'number' && Number.isFinite(result.score))
      out[index] = { ok: true, score: result.score, orders: result.orders }
    else
      out[index] = {
        error:
          `${typeof result.error_code === 'string' ? result.error_code : 'error'}: ` +
          `${typeof result.error_message === 'string' ? result.error_message : 'no score'}`,
      }
  }
  return out
}

/**
 * What a scorer may see of an item: prompt id and text, candidate texts in dataset order under opaque ids (`c<n>`, `n`
 * from a seeded shuffle so ids carry no order or label), and their images; no labels, sources, other metadata or group.
 * @example blindItem(item, 7).candidates[0] // { candidate_id: 'c1', text: '…', source: 'unknown', label: {}, metadata:
 *   {} }
 */
export function blindItem(item: PromptItem, seed: number): PromptItem {
  const numbers = shuffle(
    item.candidates.map((_, index) => index),
    seededRandom(seed, item.prompt_id),
  )
  const candidates: Candidate[] = item.candidates.map((candidate, index) => ({
    candidate_id: `c${numbers[index]}`,
    text: candidate.text,
    source: 'unknown',
    label: {},
    metadata: imagesOnly(candidate.metadata),
  }))
  return {
    prompt_id: item.prompt_id,
    prompt: item.prompt,
    candidates,
    // What the judge is shown beside the prompt, like /score's supplemental_context: part of the question, no label.
    ...(item.reference === undefined ? {} : { reference: item.reference }),
    metadata: imagesOnly(item.metadata),
  }
}

/** Images are part of what is judged, not a label: the only metadata a blind item keeps. */
function imagesOnly(metadata: Record<string, unknown>): Record<string, unknown> {
  return Array.isArray(metadata.images) ? { images: metadata.images } : {}
}

async function readJson(file: string, what: string): Promise<unknown> {
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (error) {
    throw new UsageError(`${what}: cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? messageOf(error)}`)
  }
  try {
    return JSON.parse(text)
  } catch (error) {
    throw new UsageError(`${what}: ${file} is not JSON: ${messageOf(error)}`)
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
