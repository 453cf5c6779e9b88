/**
 * Candidate evaluation (autosr §2.1, with its redundancy fixed): every candidate of a prompt is graded under
 * a rubric with V votes, concurrently under one limiter. A memo keyed by the rubric's CONTENT (not its id or
 * metadata), the candidate and the vote index means a rubric that reappears under a new id, or one vote
 * needed again by a later stage, is never graded twice in a process; the memo can be saved in a checkpoint.
 */
import { canonicalJson } from '../hash/index.ts'
import type { Limiter } from './algorithms/concurrency.ts'
import { derivedSeed, hashHex } from '../hash/index.ts'
import type { Candidate, CriterionGrades, PromptItem, Verifier } from './types.ts'
import type { SearchRubric } from '../schemas/search-rubric.ts'
import { mean, populationVariance } from '../stats/index.ts'

/** One candidate's result under one rubric. */
export interface CandidateEvaluation {
  candidate_id: string
  /** Position in the prompt's candidate list: the stable tie-breaker. */
  index: number
  /** Rubric score in [0, 1] of the per-criterion mean grades over the votes. */
  score: number
  /** Population variance of the per-vote scores (0 with one vote). */
  variance: number
  vote_scores: number[]
  /** Per-criterion mean grade over the votes (0..grade_max), null when every vote said N/A. */
  grades: Record<string, number | null>
}

/** A prompt's candidates under one rubric, best first (ties keep dataset order). */
export interface RubricEvaluation {
  prompt_id: string
  rubric_key: string
  votes: number
  candidates: CandidateEvaluation[]
}

/** Counters the evaluator keeps, for diagnostics. */
export interface EvaluatorStats {
  verifier_calls: number
  grade_memo_hits: number
  /** Grades outside 0..grade_max or not integers, clamped/rounded. */
  invalid_grades: number
}

const rubricKeys = new WeakMap<SearchRubric, string>()
const textKeys = new WeakMap<Candidate, string>()

/**
 * The content hash of a rubric as far as grading is concerned: criteria plus grade scale and N/A policy.
 * `rubric_id`, `metadata` and `num_votes` are left out (a vote's grade does not depend on how many votes follow).
 * @example rubricKey({ ...rubric, rubric_id: 'renamed' }) === rubricKey(rubric) // true
 */
export function rubricKey(rubric: SearchRubric): string {
  let key = rubricKeys.get(rubric)
  if (key === undefined) {
    const { grade_max, allow_na } = rubric.grading_protocol
    key = hashHex(canonicalJson({ criteria: rubric.criteria, grade_max, allow_na }))
    rubricKeys.set(rubric, key)
  }
  return key
}

function textKey(candidate: Candidate): string {
  let key = textKeys.get(candidate)
  if (key === undefined) {
    key = hashHex(candidate.text)
    textKeys.set(candidate, key)
  }
  return key
}

/**
 * Weight-normalised mean of grades / grade_max; N/A (null) is skipped when the protocol allows it, else counts 0.
 * Uniform weights when they sum to 0; 0 when nothing is graded. (roles/score.ts exports the public twin.)
 */
function rubricScore(rubric: SearchRubric, grades: Record<string, number | null>): number {
  const { grade_max, allow_na } = rubric.grading_protocol
  const total = rubric.criteria.reduce((sum, criterion) => sum + criterion.weight, 0)
  let numerator = 0
  let denominator = 0
  for (const criterion of rubric.criteria) {
    const weight = total > 0 ? criterion.weight / total : 1 / rubric.criteria.length
    const grade = grades[criterion.criterion_id]
    if (grade === null || grade === undefined) {
      if (allow_na) continue
      denominator += weight
      continue
    }
    numerator += weight * (grade / grade_max)
    denominator += weight
  }
  return denominator > 0 ? numerator / denominator : 0
}

/**
 * Content-addressed store of verifier answers, one entry per (prompt, candidate, rubric content, vote).
 * Concurrent requests for the same entry share one call.
 * @example const memo = new GradeMemo(); memo.load(checkpoint.memo.grades)
 */
export class GradeMemo {
  private readonly settled = new Map<string, CriterionGrades>()
  private readonly inflight = new Map<string, Promise<CriterionGrades>>()

  /**
   * The stored grades of a settled entry, or undefined (none yet, or its call is still running).
   * @example memo.get(key)?.accuracy // 4
   */
  get(key: string): CriterionGrades | undefined {
    return this.settled.get(key)
  }

  /**
   * The stored grades, or a call of `produce` shared by every concurrent caller; `hit` says which.
   * @example await memo.getOrCreate(key, () => verifier.grade(input))
   */
  async getOrCreate(
    key: string,
    produce: () => Promise<CriterionGrades>,
  ): Promise<{ grades: CriterionGrades; hit: boolean }> {
    const known = this.settled.get(key)
    if (known) return { grades: known, hit: true }
    const running = this.inflight.get(key)
    if (running) return { grades: await running, hit: true }
    const call = produce().then(
      (grades) => {
        this.settled.set(key, grades)
        this.inflight.delete(key)
        return grades
      },
      (error: unknown) => {
        this.inflight.delete(key)
        throw error
      },
    )
    this.inflight.set(key, call)
    return { grades: await call, hit: false }
  }

  /**
   * Every settled entry as a plain object (for a checkpoint), sorted by key so equal memos serialise alike.
   * @example JSON.stringify(memo.snapshot())
   */
  snapshot(): Record<string, CriterionGrades> {
    return Object.fromEntries([...this.settled].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
  }

  /**
   * Adds saved entries (from {@link GradeMemo.snapshot}).
   * @example memo.load(state.memo.grades)
   */
  load(entries: Record<string, CriterionGrades>): void {
    for (const [key, grades] of Object.entries(entries)) this.settled.set(key, grades)
  }

  /**
   * How many answers are stored.
   * @example memo.size // 0 for a fresh memo
   */
  get size(): number {
    return this.settled.size
  }
}

export interface EvaluatorOptions {
  verifier: Verifier
  /** The limiter every role call goes through. */
  limit: Limiter
  /** The search seed; vote seeds derive from it and the content. */
  seed: number
  memo?: GradeMemo
}

/**
 * Grades candidates under rubrics, memoised by content, with votes and candidates graded concurrently.
 * @example
 * const evaluator = new Evaluator({ verifier, limit: createLimiter(8), seed: 7 })
 * const { candidates } = await evaluator.evaluate(item, rubric) // best first
 */
export class Evaluator {
  readonly memo: GradeMemo
  readonly stats: EvaluatorStats = { verifier_calls: 0, grade_memo_hits: 0, invalid_grades: 0 }
  private readonly verifier: Verifier
  private readonly limit: Limiter
  private readonly seed: number

  constructor(options: EvaluatorOptions) {
    this.verifier = options.verifier
    this.limit = options.limit
    this.seed = options.seed
    this.memo = options.memo ?? new GradeMemo()
  }

  /**
   * Every candidate of `item` under `rubric`, sorted by score (descending, stable). `votes` defaults to the rubric's.
   * @example (await evaluator.evaluate(item, rubric, { votes: 1 })).candidates[0].candidate_id // the top candidate
   */
  async evaluate(item: PromptItem, rubric: SearchRubric, options: { votes?: number } = {}): Promise<RubricEvaluation> {
    const votes = options.votes ?? rubric.grading_protocol.num_votes
    const evaluations = await Promise.all(
      item.candidates.map((candidate, index) => this.evaluateCandidate(item, candidate, index, rubric, votes)),
    )
    const candidates = evaluations.sort((a, b) => b.score - a.score || a.index - b.index)
    return { prompt_id: item.prompt_id, rubric_key: rubricKey(rubric), votes, candidates }
  }

  /**
   * One candidate under a rubric with `votes` votes (vote i is the same call whatever the vote count).
   * @example await evaluator.evaluateCandidate(item, item.candidates[0], 0, rubric, 3)
   */
  async evaluateCandidate(
    item: PromptItem,
    candidate: Candidate,
    index: number,
    rubric: SearchRubric,
    votes: number,
  ): Promise<CandidateEvaluation> {
    const key = rubricKey(rubric)
    const voteGrades = await Promise.all(
      Array.from({ length: votes }, (_, vote) => this.gradesOfVote(item, candidate, rubric, key, vote)),
    )
    const voteScores = voteGrades.map((grades) => rubricScore(rubric, grades))
    const grades: Record<string, number | null> = {}
    for (const criterion of rubric.criteria) {
      const given = voteGrades
        .map((vote) => vote[criterion.criterion_id])
        .filter((grade): grade is number => typeof grade === 'number')
      grades[criterion.criterion_id] = mean(given)
    }
    const variance = populationVariance(voteScores) ?? Number.NaN
    return {
      candidate_id: candidate.candidate_id,
      index,
      score: rubricScore(rubric, grades),
      variance,
      vote_scores: voteScores,
      grades,
    }
  }

  /**
   * One vote's grades: from the memo without a promise when it holds them (most of a search's evaluations), else
   * the verifier's call, shared with every concurrent caller.
   */
  private gradesOfVote(
    item: PromptItem,
    candidate: Candidate,
    rubric: SearchRubric,
    key: string,
    vote: number,
  ): CriterionGrades | Promise<CriterionGrades> {
    const memoKey = [item.prompt_id, candidate.candidate_id, textKey(candidate), key, vote].join('\u0000')
    const known = this.memo.get(memoKey)
    if (known) {
      this.stats.grade_memo_hits++
      return known
    }
    return this.memo
      .getOrCreate(memoKey, async () => {
        const seed = derivedSeed(this.seed, 'grade', item.prompt_id, candidate.candidate_id, key, vote)
        const raw = await this.limit(() => {
          this.stats.verifier_calls++
          return this.verifier.grade({ item, candidate, rubric, vote, seed })
        })
        return this.sanitize(rubric, raw)
      })
      .then(({ grades, hit }) => {
        if (hit) this.stats.grade_memo_hits++
        return grades
      })
  }

  /** Keeps only the rubric's criteria; non-finite → N/A; others rounded and clamped to 0..grade_max (and counted). */
  private sanitize(rubric: SearchRubric, raw: CriterionGrades): CriterionGrades {
    const { grade_max } = rubric.grading_protocol
    const grades: CriterionGrades = {}
    for (const { criterion_id } of rubric.criteria) {
      const grade = raw[criterion_id]
      if (grade === null || grade === undefined || !Number.isFinite(grade)) {
        grades[criterion_id] = null
        continue
      }
      const fixed = Math.min(grade_max, Math.max(0, Math.round(grade)))
      if (fixed !== grade) this.stats.invalid_grades++
      grades[criterion_id] = fixed
    }
    return grades
  }
}
