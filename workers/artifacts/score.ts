/**
 * Scoring with a deployed artifact: the artifact's rubric for the prompt id (else its `__default__` rubric),
 * graded by the search's verifier (`LlmVerifier`: the artifact's locale and content extraction) with the artifact's
 * number of votes and the search's vote-seed recipe, and turned into a score in [0, 1] by `rubricScore` over the
 * per-criterion mean grades. The grade scale and N/A policy are each rubric's own `grading_protocol` — the scale its
 * criteria were searched on. A failed model call is an error (`llm_unavailable`), never a silent 0.
 */
import { z } from 'zod'
import { AppError, contextLengthExceeded } from '../../src/errors/index.ts'
import { LlmError, type ChatModel } from '../../src/llm/index.ts'
import { rubricForPrompt, type RmArtifact } from '../../src/schemas/artifact.ts'
import { createLimiter, type Limiter } from '../../src/search/algorithms/concurrency.ts'
import { GradeMemo, rubricKey } from '../../src/search/evaluator.ts'
import { derivedSeed } from '../../src/hash/index.ts'
import { LlmVerifier, meanGrades, rubricScore } from '../../src/search/roles/index.ts'
import type { Candidate, CriterionGrades, PromptItem } from '../../src/search/types.ts'
import { imagesOfRequest, RequestImages } from './images.ts'
import { populationVariance } from '../../src/stats/index.ts'
import { trajectoryForVerifier } from '../../src/agents/scorer/trajectory.ts'
import { Trajectory, trajectoryText } from '../../src/schemas/trajectory.ts'

/** Verifier calls in flight at once per request: the Worker's 6 simultaneous connections. */
const RM_LLM_CONCURRENCY = 6
/** Attempts per verifier call (transport failures and invalid replies), with backoff between them. */
const RM_LLM_ATTEMPTS = 3

/**
 * The body of `POST /rm/<target>/score` (one item of `batch_score`), as the reference verl client sends it.
 * Extra fields are accepted and ignored. Images (workers/artifacts/images.ts) are read by library artifacts only.
 * @example RmScoreRequest.parse({ prompt_id: 'p1', prompt: 'Q?', candidate: { candidate_id: 'c1', text: 'A.' } })
 */
export const RmScoreRequest = z.object({
  prompt_id: z.string().max(256),
  prompt: z.string().max(200_000),
  /**
   * A reference: library artifacts score the candidate against it; rubric artifacts show it to the verifier as the
   * prompt's reference answer (data, as search and bench show a dataset's `reference`).
   */
  reference: z.string().max(200_000).optional(),
  /** The prompt's images. */
  images: RequestImages.optional(),
  /** The reference response's images (library artifacts). */
  reference_images: RequestImages.optional(),
  candidate: z
    .object({
      candidate_id: z.string().max(256),
      text: z.string().max(200_000).optional(),
      /**
       * The candidate as a trajectory (its turns after the prompt, OpenAI-style): a rubric artifact's verifier reads
       * each turn under its speaker; `text` is then optional (derived: `trajectoryText`).
       */
      messages: Trajectory.optional(),
      source: z.string().max(256).optional(),
      metadata: z.record(z.string(), z.unknown()).optional(),
      images: RequestImages.optional(),
    })
    .refine((candidate) => candidate.text !== undefined || candidate.messages !== undefined, {
      message: 'a candidate has text or messages',
      path: ['text'],
    })
    .transform(({ text, ...candidate }) => ({ ...candidate, text: text ?? trajectoryText(candidate.messages ?? []) })),
})
export type RmScoreRequest = z.infer<typeof RmScoreRequest>

/** One criterion of a score: its weight in the rubric and its mean grade over the votes (null = N/A). */
interface RmCriterionGrade {
  criterion_id: string
  weight: number
  grade: number | null
}

/** What scoring one candidate with an artifact gives. */
export interface RmScore {
  artifact_id: string
  prompt_id: string
  candidate_id: string
  /** The rubric score of the mean grades, in [0, 1]. */
  score: number
  rubric_id: string
  /** True when the artifact has no rubric of its own for the prompt id and its `__default__` rubric was used. */
  fallback_rubric: boolean
  grade_max: number
  criteria: RmCriterionGrade[]
  /** Mean grade per criterion over the votes (autosr's name), null when every vote said N/A. */
  majority_grades: CriterionGrades
  vote_scores: number[]
  per_vote_grades: CriterionGrades[]
  /** Population variance of the vote scores (0 with one vote). */
  variance: number
  /** No criterion got a grade: the score is 0 and says nothing about the candidate. */
  all_na: boolean
}

/**
 * Scores candidates with one artifact for the length of one request: its verifier calls share one concurrency
 * limit, and identical (prompt, candidate, rubric, vote) questions within the request are asked once.
 * @example
 * const scorer = new ArtifactScorer(artifact, new MockChatModel())
 * const { score, criteria } = await scorer.score({ prompt_id: 'p1', prompt: 'Q?', candidate: { candidate_id: 'c1',
 * text: 'A.' } })
 */
export class ArtifactScorer {
  private readonly verifier: LlmVerifier
  private readonly limit: Limiter
  private readonly memo = new GradeMemo()

  constructor(
    readonly artifact: RmArtifact,
    model: ChatModel,
    options: { concurrency?: number } = {},
  ) {
    this.verifier = new LlmVerifier(model, {
      locale: artifact.runtime.locale,
      extraction: artifact.runtime.extraction,
      ...(artifact.runtime.judging ? { judging: artifact.runtime.judging } : {}),
      retry: { maxAttempts: RM_LLM_ATTEMPTS, maxDelayMs: 4_000 },
    })
    this.limit = createLimiter(options.concurrency ?? RM_LLM_CONCURRENCY)
  }

  /**
   * Scores one candidate. Throws `AppError('prompt_not_found')` when the artifact has neither the prompt's rubric nor
   * a `__default__` one, and `AppError('llm_unavailable')` (503 transient, 502 invalid replies) when the model fails.
   * @example (await scorer.score(request)).fallback_rubric // true when the __default__ rubric was used
   */
  async score(request: RmScoreRequest): Promise<RmScore> {
    const { artifact } = this
    const found = rubricForPrompt(artifact, request.prompt_id)
    if (!found) {
      throw new AppError(
        'prompt_not_found',
        `prompt_id=${request.prompt_id} not found in artifact ${artifact.artifact_id}, which has no __default__ rubric`,
      )
    }
    const { rubric, fallback } = found
    if (imagesOfRequest(request).any) {
      throw new AppError(
        'invalid_request',
        `artifact ${artifact.artifact_id} is a rubric artifact: ` +
          'its verifier grades text only (its rubric was searched on text), so it cannot score images; ' +
          'send them to a library artifact, or leave them out',
      )
    }
    const { item, candidate } = await verifierInputs(request, artifact.runtime.locale)
    const key = rubricKey(rubric)
    // The texts themselves, not a hash of them: the Map hashes a key natively, far faster than hashing it here.
    const contentKey = [
      request.prompt,
      request.reference ?? '',
      candidate.text,
      request.prompt_id,
      candidate.candidate_id,
      key,
    ].join('\u0000')
    let votes: CriterionGrades[]
    try {
      votes = await Promise.all(
        Array.from({ length: artifact.runtime.num_votes }, (_, vote) => {
          // The search's recipe (src/search/evaluator.ts), so a candidate grades here as it did in the search.
          const seed = derivedSeed(artifact.runtime.seed, 'grade', request.prompt_id, candidate.candidate_id, key, vote)
          return this.memo
            .getOrCreate(`${contentKey}\u0000${vote}`, () =>
              this.limit(() => this.verifier.grade({ item, candidate, rubric, vote, seed })),
            )
            .then(({ grades }) => grades)
        }),
      )
    } catch (error) {
      throw asLlmUnavailable(error)
    }
    const voteScores = votes.map((grades) => rubricScore(grades, rubric).score)
    const mean = meanGrades(votes, rubric)
    const total = rubricScore(mean, rubric)
    const variance = populationVariance(voteScores) ?? Number.NaN
    return {
      artifact_id: artifact.artifact_id,
      prompt_id: request.prompt_id,
      candidate_id: candidate.candidate_id,
      score: total.score,
      rubric_id: rubric.rubric_id,
      fallback_rubric: fallback,
      grade_max: rubric.grading_protocol.grade_max,
      criteria: rubric.criteria.map((criterion) => ({
        criterion_id: criterion.criterion_id,
        weight: criterion.weight,
        grade: mean[criterion.criterion_id] ?? null,
      })),
      majority_grades: mean,
      vote_scores: voteScores,
      per_vote_grades: votes,
      variance,
      all_na: total.allNa,
    }
  }
}

/**
 * A model failure as the API reports it: `llm_unavailable`, 503 with Retry-After when it may heal, 502 when the
 * model answered but never validly (or refused the request). Other errors pass through unchanged.
 * @example throw asLlmUnavailable(error)
 */
function asLlmUnavailable(error: unknown): unknown {
  if (!(error instanceof LlmError)) return error
  if (error.kind === 'context_length')
    return contextLengthExceeded('verifier', error.message, error.details.contextLimit)
  const transient = error.transient
  return new AppError(
    'llm_unavailable',
    `the verifier model failed (${error.kind}${error.retryable ? ` after up to ${RM_LLM_ATTEMPTS} attempts` : ''}): ` +
      error.message,
    {
      status: transient ? 503 : 502,
      details: { failure: error.kind },
      ...(transient ? { retryAfterSeconds: error.retryAfterSeconds ?? 5 } : {}),
    },
  )
}

/** The prompt item (with its reference) and the candidate a rubric artifact's verifier grades. */
async function verifierInputs(
  request: RmScoreRequest,
  locale: RmArtifact['runtime']['locale'],
): Promise<{ item: PromptItem; candidate: Candidate }> {
  const item: PromptItem = {
    prompt_id: request.prompt_id,
    prompt: request.prompt,
    candidates: [],
    ...(request.reference ? { reference: request.reference } : {}),
    metadata: {},
  }
  const candidate: Candidate = {
    candidate_id: request.candidate.candidate_id,
    text: request.candidate.messages
      ? await trajectoryForVerifier(request.candidate.messages, locale)
      : request.candidate.text,
    source: request.candidate.source ?? 'unknown',
    label: {},
    metadata: request.candidate.metadata ?? {},
  }
  return { item, candidate }
}
