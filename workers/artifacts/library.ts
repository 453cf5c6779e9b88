/**
 * Scoring with a judge-library artifact (`kind: 'library'`). The library's judge (Router + Sub-Agent, src/evolve)
 * is pairwise, so the edge turns it into a GRPO-ready SCALAR (RewardHarness §4.5; a documented design choice, not
 * parity with a paper formula):
 *
 *   score = mean over the judged orders of outcome(candidate vs reference), outcome win 1 / tie 0.5 / loss 0
 *
 * The candidate is judged against a reference response in BOTH orders (candidate first, then reference first), so
 * position bias cancels; the score lies in {0, 0.25, 0.5, 0.75, 1} ⊂ [0, 1]. A failed order (model error,
 * unparseable reply, tool-call limit) is left out and reported in `failures`, never read as a tie; when every order
 * fails the request fails (`llm_unavailable`). The reference is the request's top-level `reference` or
 * `candidate.metadata.reference`; without one the library cannot score (400 `invalid_request`). Group-normalised
 * advantages ((r − mean) / (std + ε) over a GRPO group) are left to the trainer, as §4.5 recommends.
 */
import { AppError } from '../../src/errors/index.ts'
import { ImageRegistry, type ImageResolver, type ItemImages } from '../../src/evolve/images.ts'
import {
  judgeWithLibrary,
  LibraryRouter,
  OUTCOME_VALUE,
  type JudgeOutcome,
  type OrderOutcome,
} from '../../src/evolve/judge.ts'
import type { Library } from '../../src/library/index.ts'
import type { ChatModel } from '../../src/llm/index.ts'
import type { LibraryArtifact } from '../../src/schemas/artifact.ts'
import { createLimiter, type Limiter } from '../../src/search/algorithms/concurrency.ts'
import { imagesOfRequest, type RequestImage, type RequestWithImages } from './images.ts'
import { mean } from '../../src/stats/index.ts'

/** One judged order: which side the candidate was on, and what the judge said (or why it failed). */
interface JudgedOrder {
  order: 'candidate_first' | 'candidate_second'
  ok: boolean
  outcome: OrderOutcome | null
  failure: string | null
  tool_calls: number
  entries: string[]
}

/** A candidate's win rate against one or more opponents, both orders each. */
interface WinRate {
  /** Mean outcome value over the orders that were judged; null when every order failed. */
  score: number | null
  orders: JudgedOrder[]
  failures: number
}

/**
 * The library an artifact carries, as src/library's model (entries by name).
 * @example const lib = libraryOf(artifact); Object.keys(lib.entries)
 */
function libraryOf(artifact: Pick<LibraryArtifact, 'entries' | 'provenance'>): Library {
  const entries: Library['entries'] = {}
  for (const entry of artifact.entries) {
    entries[entry.name] = {
      name: entry.name,
      kind: entry.kind,
      description: entry.description,
      body: entry.body,
      ...(entry.when_to_use ? { when_to_use: entry.when_to_use } : {}),
    }
  }
  return { id: artifact.provenance.library_id, status: 'active', entries }
}

function outcomeOf(result: JudgeOutcome, candidateSide: 'A' | 'B'): OrderOutcome | null {
  if (!result.ok) return null
  if (result.preference === 'tie') return 'tie'
  return result.preference === candidateSide ? 'win' : 'loss'
}

/** Image handles of a judged instruction, the candidate and each opponent, and what resolves them at call time. */
interface WinRateImages {
  resolver: ImageResolver
  instruction: string[]
  candidate: string[]
  /** One list per opponent, in the order of `opponents`. */
  opponents: string[][]
}

/**
 * Judges `candidate` against each opponent in both orders with the library's judge and returns its win rate.
 * Failures are counted apart and excluded from the mean (never ties). With `images`, the Sub-Agent and its tools see
 * each side's images beside its text, swapped with the answers in the second order.
 * @example
 * const router = new LibraryRouter(model)
 * const { score } = await libraryWinRate(model, router, lib, 'Explain X', 'X is…', ['A reference answer'])
 */
async function libraryWinRate(
  model: ChatModel,
  router: LibraryRouter,
  library: Library,
  instruction: string,
  candidate: string,
  opponents: readonly string[],
  options: {
    locale?: 'en' | 'zh'
    maxToolCalls?: number
    limit?: Limiter
    retry?: { maxAttempts?: number; baseDelayMs?: number; maxDelayMs?: number }
    images?: WinRateImages
  } = {},
): Promise<WinRate> {
  const limit = options.limit ?? createLimiter(4)
  const { images } = options
  const judgeOptions = {
    ...(options.locale ? { locale: options.locale } : {}),
    ...(options.maxToolCalls === undefined ? {} : { maxToolCalls: options.maxToolCalls }),
    ...(options.retry ? { retry: options.retry } : {}),
    ...(images ? { images: images.resolver } : {}),
  }
  const shown = (first: string[], second: string[]): { images?: ItemImages } =>
    images ? { images: { instruction: images.instruction, first, second } } : {}
  let routed: string[]
  try {
    routed = await router.route(library, instruction)
  } catch {
    routed = []
  }
  const jobs = opponents.flatMap((opponent, index) => {
    const candidateImages = images?.candidate ?? []
    const opponentImages = images?.opponents[index] ?? []
    return [
      {
        order: 'candidate_first' as const,
        first: candidate,
        second: opponent,
        side: 'A' as const,
        ...shown(candidateImages, opponentImages),
      },
      {
        order: 'candidate_second' as const,
        first: opponent,
        second: candidate,
        side: 'B' as const,
        ...shown(opponentImages, candidateImages),
      },
    ]
  })
  const orders = await Promise.all(
    jobs.map((job) =>
      limit(async (): Promise<JudgedOrder> => {
        const result = await judgeWithLibrary(
          model,
          library,
          routed,
          { instruction, first: job.first, second: job.second, ...(job.images ? { images: job.images } : {}) },
          judgeOptions,
        )
        const outcome = outcomeOf(result, job.side)
        return {
          order: job.order,
          ok: result.ok,
          outcome,
          failure: result.ok ? null : result.failure,
          tool_calls: result.tool_calls,
          entries: result.entries,
        }
      }),
    ),
  )
  const judged = orders.filter((order) => order.outcome !== null)
  const score = mean(judged.map((order) => OUTCOME_VALUE[order.outcome!]))
  return { score, orders, failures: orders.length - judged.length }
}

/** The request shape the library scorer reads (RmScoreRequest with its optional reference and images). */
export interface LibraryScoreRequest extends RequestWithImages {
  prompt_id: string
  prompt: string
  reference?: string | undefined
  candidate: {
    candidate_id: string
    text: string
    metadata?: Record<string, unknown> | undefined
    images?: RequestImage[] | undefined
  }
}

/** What scoring one candidate with a library artifact gives. */
export interface LibraryScore {
  artifact_id: string
  artifact_kind: 'library'
  prompt_id: string
  candidate_id: string
  /** Win rate against the reference over the judged orders, in [0, 1]. */
  score: number
  scoring: 'pairwise_win_rate_vs_reference'
  reference_source: 'request' | 'candidate.metadata'
  orders: JudgedOrder[]
  /** Orders that failed (left out of the score). */
  failures: number
  /** True when both orders were judged and gave the same verdict for the candidate. */
  consistent: boolean
}

/**
 * The reference response a request carries: top-level `reference`, else `candidate.metadata.reference`.
 * @example
 * const candidate = { candidate_id: 'c', text: 'A', metadata: { reference: 'R' } }
 * referenceOf({ prompt_id: 'p', prompt: 'Q', candidate }) // { text: 'R', source: 'candidate.metadata' }
 */
function referenceOf(
  request: LibraryScoreRequest,
): { text: string; source: LibraryScore['reference_source'] } | undefined {
  if (typeof request.reference === 'string' && request.reference.trim())
    return { text: request.reference, source: 'request' }
  const fromMetadata = request.candidate.metadata?.reference
  if (typeof fromMetadata === 'string' && fromMetadata.trim())
    return { text: fromMetadata, source: 'candidate.metadata' }
  return undefined
}

/**
 * Scores candidates with a library artifact for one request (one router cache, one concurrency limit).
 * @example
 * const scorer = new LibraryArtifactScorer(artifact, new MockChatModel())
 * const { score } = await scorer.score({ prompt_id: 'p1', prompt: 'Q?', reference: 'R.', candidate: { candidate_id:
 * 'c1', text: 'A.' } })
 */
export class LibraryArtifactScorer {
  private readonly library: Library
  private readonly router: LibraryRouter
  private readonly limit: Limiter

  constructor(
    readonly artifact: LibraryArtifact,
    private readonly model: ChatModel,
    options: { concurrency?: number } = {},
  ) {
    this.library = libraryOf(artifact)
    this.router = new LibraryRouter(model, {
      locale: artifact.runtime.locale,
      retry: { maxAttempts: 3, maxDelayMs: 4_000 },
    })
    this.limit = createLimiter(options.concurrency ?? 6)
  }

  /**
   * Scores one candidate against the request's reference. Throws `AppError('invalid_request')` without a reference and
   * `AppError('llm_unavailable')` when both orders fail.
   * @example (await scorer.score(request)).orders.length // 2
   */
  async score(request: LibraryScoreRequest): Promise<LibraryScore> {
    const { artifact } = this
    const reference = referenceOf(request)
    if (!reference) {
      throw new AppError(
        'invalid_request',
        `artifact ${artifact.artifact_id} is a judge library (pairwise): ` +
          'send the reference response to compare with as "reference" or "candidate.metadata.reference"',
      )
    }
    const result = await libraryWinRate(
      this.model,
      this.router,
      this.library,
      request.prompt,
      request.candidate.text,
      [reference.text],
      {
        locale: artifact.runtime.locale,
        maxToolCalls: artifact.runtime.max_tool_calls,
        limit: this.limit,
        retry: { maxAttempts: 3, maxDelayMs: 4_000 },
        ...requestImages(request),
      },
    )
    if (result.score === null) {
      const kinds = [...new Set(result.orders.map((order) => order.failure ?? 'error'))]
      const transient = kinds.some(
        (kind) =>
          kind !== 'invalid_reply' &&
          kind !== 'context_length' &&
          kind !== 'bad_request' &&
          kind !== 'tool_limit' &&
          kind !== 'image' &&
          kind !== 'error',
      )
      throw new AppError('llm_unavailable', `the library judge failed in both orders (${kinds.join(', ')})`, {
        status: transient ? 503 : 502,
        details: { failures: kinds },
        ...(transient ? { retryAfterSeconds: 5 } : {}),
      })
    }
    const [first, second] = result.orders
    return {
      artifact_id: artifact.artifact_id,
      artifact_kind: 'library',
      prompt_id: request.prompt_id,
      candidate_id: request.candidate.candidate_id,
      score: result.score,
      scoring: 'pairwise_win_rate_vs_reference',
      reference_source: reference.source,
      orders: result.orders,
      failures: result.failures,
      consistent: first?.outcome !== null && first?.outcome === second?.outcome,
    }
  }
}

/** The request's images as registry handles (a registry per request: url and data_url images only), if it has any. */
function requestImages(request: LibraryScoreRequest): { images?: WinRateImages } {
  const images = imagesOfRequest(request)
  if (!images.any) return {}
  const registry = new ImageRegistry()
  const handles = (refs: RequestImage[]) => refs.map((ref) => registry.add(ref))
  return {
    images: {
      resolver: registry,
      instruction: handles(images.prompt),
      candidate: handles(images.candidate),
      opponents: [handles(images.reference)],
    },
  }
}
