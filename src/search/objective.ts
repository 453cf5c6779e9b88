/**
 * The search objective (autosr §2.2, "Chasing the Tail"): how well a rubric orders the candidates it ranks
 * highest, judged pairwise.
 *
 *   total = TailAcc − λ·TailVar + μ·DiverseTailAcc
 *
 * Changes against autosr (§8.3, §8.5): the tail grows to hold at least `min_tail_pairs` pairs, the diverse
 * accuracy is shrunk by its own pair count, and Kendall's tau-b and NDCG against the ground-truth ranking are
 * reported alongside (not in the total). The judge is asked once per unordered pair per prompt, in dataset
 * order (never the rubric's order), and its answer is reused by every rubric for the whole search.
 * The objective may read labels and sources: it is not an LLM payload.
 */
import type { ObjectiveConfig } from './config.ts'
import type { Limiter } from './algorithms/concurrency.ts'
import type { RubricEvaluation } from './evaluator.ts'
import { derivedSeed, Rng } from '../hash/index.ts'
import type { Candidate, PreferenceJudge, Preference, PromptItem } from './types.ts'
import { mean } from '../stats/index.ts'

/** Everything the objective measured about one rubric on one prompt. */
export interface ObjectiveResult {
  total: number
  /** TailAcc after shrinkage towards 0.5. */
  tail_acc: number
  /** correct / valid pairs, 0.5 without valid pairs. */
  raw_tail_acc: number
  tail_var: number
  diverse_tail_acc: number
  raw_diverse_tail_acc: number
  /** Candidates in the tail and unordered pairs among them; `judged_pairs` ≤ `tail_pairs` under a budget. */
  tail_size: number
  tail_pairs: number
  judged_pairs: number
  /**
   * Judged pairs with a preference (the judge's ties are skipped), of which `correct_pairs` the rubric orders alike.
   */
  valid_pairs: number
  correct_pairs: number
  /** Valid pairs whose candidates come from different sources. */
  diverse_pairs: number
  /** score[0] − score[1] under the rubric. */
  top_margin: number
  /** score(ground-truth best) − score(ground-truth runner-up); `top_margin` without labels. */
  signed_top_margin: number
  /** Kendall's tau-b between rubric scores and the ground truth over all candidates; null without labels. */
  kendall_tau: number | null
  /** NDCG of the rubric's full ranking (ties broken pessimistically) against the ground truth; null without labels. */
  ndcg: number | null
}

/** A preference between two candidates of a prompt: 1 = left better, −1 = right better, 0 = tie. */
export type PairJudge = (item: PromptItem, left: Candidate, right: Candidate) => Promise<Preference>

/**
 * Judge answers per (prompt, unordered pair), for the whole search: the judge does not depend on the rubric.
 * Pairs are always put to the judge in dataset order, and concurrent requests share one call.
 * @example
 * const judges = new JudgeMemo(roles.judge, createLimiter(8))
 * await computeObjective(item, evaluation, judges.prefer, config)
 */
export class JudgeMemo {
  judge_calls = 0
  memo_hits = 0
  private readonly settled = new Map<string, Preference>()
  private readonly inflight = new Map<string, Promise<Preference>>()

  constructor(
    private readonly judge: PreferenceJudge,
    private readonly limit: Limiter,
  ) {}

  /**
   * The memoised judgement of `left` against `right` (either order); a bound function, safe to pass around.
   * @example await judges.prefer(item, item.candidates[1], item.candidates[0]) // 1 when the second candidate is better
   */
  readonly prefer: PairJudge = async (item, left, right) => {
    const leftIndex = item.candidates.findIndex((candidate) => candidate.candidate_id === left.candidate_id)
    const rightIndex = item.candidates.findIndex((candidate) => candidate.candidate_id === right.candidate_id)
    const flipped = leftIndex > rightIndex
    const [first, second] = flipped ? [right, left] : [left, right]
    const key = [item.prompt_id, first.candidate_id, second.candidate_id].join('\u0000')
    let preference = this.settled.get(key)
    if (preference === undefined) {
      let running = this.inflight.get(key)
      if (running) this.memo_hits++
      else {
        running = this.limit(() => {
          this.judge_calls++
          return this.judge.compare({ item, left: first, right: second })
        }).then(
          (answer) => {
            const normalised: Preference = answer > 0 ? 1 : answer < 0 ? -1 : 0
            this.settled.set(key, normalised)
            this.inflight.delete(key)
            return normalised
          },
          (error: unknown) => {
            this.inflight.delete(key)
            throw error
          },
        )
        this.inflight.set(key, running)
      }
      preference = await running
    } else this.memo_hits++
    return flipped ? ((-preference || 0) as Preference) : preference
  }

  /**
   * Every settled judgement, keyed `prompt_id \0 first_id \0 second_id` (dataset order) and sorted by key, for a
   * checkpoint.
   * @example state.memo.judge = judges.snapshot()
   */
  snapshot(): Record<string, Preference> {
    return Object.fromEntries([...this.settled].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
  }

  /**
   * Adds saved judgements (from {@link JudgeMemo.snapshot}).
   * @example judges.load(state.memo.judge)
   */
  load(entries: Record<string, Preference>): void {
    for (const [key, preference] of Object.entries(entries)) this.settled.set(key, preference)
  }
}

/**
 * How many of the top candidates form the tail: ⌈n·tail_fraction⌉ (at least 2), grown until the tail holds
 * `min_tail_pairs` unordered pairs or every candidate.
 * @example tailSize(6, 0.25, 3) // 3 (autosr would use 2, i.e. a single pair)
 * @internal
 */
export function tailSize(candidates: number, tailFraction: number, minTailPairs: number): number {
  let size = Math.min(candidates, Math.max(2, Math.ceil(candidates * tailFraction)))
  while (size < candidates && (size * (size - 1)) / 2 < minTailPairs) size++
  return size
}

/**
 * Ground-truth quality per candidate (higher is better): from `rank` when every candidate has one, else from
 * `quality` when every candidate has one, else null.
 * @example groundTruthValues(item) // [-1, -3, -2] for ranks 1, 3, 2
 * @internal
 */
export function groundTruthValues(item: PromptItem): number[] | null {
  const { candidates } = item
  if (candidates.every((candidate) => candidate.label.rank !== undefined))
    return candidates.map((candidate) => -candidate.label.rank!)
  if (candidates.every((candidate) => candidate.label.quality !== undefined))
    return candidates.map((candidate) => candidate.label.quality!)
  return null
}

/**
 * Kendall's tau-b between two score vectors (ties count for neither side); null when either is constant.
 * @example kendallTau([3, 2, 1], [30, 20, 10]) // 1
 * @internal
 */
export function kendallTau(predicted: readonly number[], truth: readonly number[], tieTolerance = 0): number | null {
  let concordant = 0
  let discordant = 0
  let tiedPredicted = 0
  let tiedTruth = 0
  let pairs = 0
  for (let i = 0; i < predicted.length; i++) {
    for (let j = i + 1; j < predicted.length; j++) {
      pairs++
      const dp = Math.abs(predicted[i]! - predicted[j]!) <= tieTolerance ? 0 : Math.sign(predicted[i]! - predicted[j]!)
      const dt = Math.sign(truth[i]! - truth[j]!)
      if (dp === 0) tiedPredicted++
      if (dt === 0) tiedTruth++
      if (dp !== 0 && dt !== 0) dp === dt ? concordant++ : discordant++
    }
  }
  const denominator = Math.sqrt((pairs - tiedPredicted) * (pairs - tiedTruth))
  return denominator > 0 ? (concordant - discordant) / denominator : null
}

/**
 * NDCG of the order given by `predicted` (descending; ties broken against the truth, so a flat rubric earns no
 * credit) with gains = truth rescaled to [0, 1]; null when the truth is constant.
 * @example ndcg([0.9, 0.5, 0.1], [3, 2, 1]) // 1
 * @internal
 */
export function ndcg(predicted: readonly number[], truth: readonly number[], tieTolerance = 0): number | null {
  const low = Math.min(...truth)
  const high = Math.max(...truth)
  if (!(high > low)) return null
  const gain = truth.map((value) => (value - low) / (high - low))
  const indices = truth.map((_, index) => index)
  const order = [...indices].sort((a, b) => {
    const diff = predicted[b]! - predicted[a]!
    if (Math.abs(diff) > tieTolerance) return diff
    return gain[a]! - gain[b]! || a - b
  })
  const ideal = [...indices].sort((a, b) => gain[b]! - gain[a]! || a - b)
  const dcg = (ranking: number[]) =>
    ranking.reduce((sum, index, position) => sum + gain[index]! / Math.log2(position + 2), 0)
  return dcg(order) / dcg(ideal)
}

const shrink = (accuracy: number, valid: number, prior: number) =>
  prior > 0 ? 0.5 + (valid / (valid + prior)) * (accuracy - 0.5) : accuracy

/** The signed top margin (ground-truth best minus runner-up), Kendall tau and NDCG, where the item has a truth. */
function rankingAgainstTruth(
  item: PromptItem,
  scored: RubricEvaluation['candidates'],
  topMargin: number,
  tolerance: number,
): { signedTopMargin: number; tau: number | null; gain: number | null } {
  const truth = groundTruthValues(item)
  if (!truth) return { signedTopMargin: topMargin, tau: null, gain: null }
  const scoreByIndex = new Array<number>(item.candidates.length)
  for (const entry of scored) scoreByIndex[entry.index] = entry.score
  const byTruth = truth.map((_, index) => index).sort((a, b) => truth[b]! - truth[a]! || a - b)
  return {
    signedTopMargin: scoreByIndex[byTruth[0]!]! - scoreByIndex[byTruth[1]!]!,
    tau: kendallTau(scoreByIndex, truth, tolerance),
    gain: ndcg(scoreByIndex, truth, tolerance),
  }
}

/** Every pair of tail positions, or a seeded sample of `budget` of them (never fewer than `min_tail_pairs`). */
function tailPairsToJudge(
  item: PromptItem,
  evaluation: RubricEvaluation,
  tailLength: number,
  budget: number,
  config: ObjectiveConfig,
): Array<[number, number]> {
  const pairs: Array<[number, number]> = []
  for (let i = 0; i < tailLength; i++) for (let j = i + 1; j < tailLength; j++) pairs.push([i, j])
  const effective = Math.max(budget, config.min_tail_pairs)
  if (budget <= 0 || pairs.length <= effective) return pairs
  const rng = Rng.fromSeed(derivedSeed(config.seed, 'pairs', item.prompt_id, evaluation.rubric_key, effective))
  return rng.sample(pairs, effective).sort((a, b) => a[0] - b[0] || a[1] - b[1])
}

/** Judged pairs the rubric's scores order as the judge does, overall and between different sources. */
function tallyPairs(
  item: PromptItem,
  tail: RubricEvaluation['candidates'],
  pairs: Array<[number, number]>,
  judgements: number[],
  tolerance: number,
): { valid: number; correct: number; diverseValid: number; diverseCorrect: number } {
  const tally = { valid: 0, correct: 0, diverseValid: 0, diverseCorrect: 0 }
  for (const [k, [i, j]] of pairs.entries()) {
    const preference = judgements[k]!
    if (preference === 0) continue
    const left = tail[i]!
    const right = tail[j]!
    const diff = left.score - right.score
    const modelPreference = Math.abs(diff) <= tolerance ? 0 : Math.sign(diff)
    const isCorrect = modelPreference === preference
    tally.valid++
    if (isCorrect) tally.correct++
    if (item.candidates[left.index]!.source !== item.candidates[right.index]!.source) {
      tally.diverseValid++
      if (isCorrect) tally.diverseCorrect++
    }
  }
  return tally
}

/**
 * The objective of a rubric on one prompt, from its evaluation and pairwise judgements of the tail.
 * `budget` > 0 judges a seeded sample of that many tail pairs (never fewer than `min_tail_pairs`).
 * @example
 * const result = await computeObjective(item, await evaluator.evaluate(item, rubric), judges.prefer, config)
 * result.total // TailAcc − λ·TailVar + μ·DiverseTailAcc
 */
export async function computeObjective(
  item: PromptItem,
  evaluation: RubricEvaluation,
  prefer: PairJudge,
  config: ObjectiveConfig,
  options: { budget?: number } = {},
): Promise<ObjectiveResult> {
  const scored = evaluation.candidates
  const size = tailSize(scored.length, config.tail_fraction, config.min_tail_pairs)
  const tail = scored.slice(0, size)
  const topMargin = scored.length > 1 ? scored[0]!.score - scored[1]!.score : 0

  const { signedTopMargin, tau, gain } = rankingAgainstTruth(item, scored, topMargin, config.tie_tolerance)

  const tailVar = mean(tail.map((entry) => entry.variance)) ?? Number.NaN

  const tailPairs = (tail.length * (tail.length - 1)) / 2
  const pairs = tailPairsToJudge(item, evaluation, tail.length, options.budget ?? 0, config)

  const judgements = await Promise.all(
    pairs.map(([i, j]) => prefer(item, item.candidates[tail[i]!.index]!, item.candidates[tail[j]!.index]!)),
  )
  const { valid, correct, diverseValid, diverseCorrect } = tallyPairs(
    item,
    tail,
    pairs,
    judgements,
    config.tie_tolerance,
  )

  const rawTailAcc = valid > 0 ? correct / valid : 0.5
  const tailAcc = shrink(rawTailAcc, valid, config.pair_confidence_prior)
  const rawDiverse = diverseValid > 0 ? diverseCorrect / diverseValid : rawTailAcc
  const diverseTailAcc = diverseValid > 0 ? shrink(rawDiverse, diverseValid, config.pair_confidence_prior) : tailAcc
  return {
    total: tailAcc - config.lambda_var * tailVar + config.mu_diverse * diverseTailAcc,
    tail_acc: tailAcc,
    raw_tail_acc: rawTailAcc,
    tail_var: tailVar,
    diverse_tail_acc: diverseTailAcc,
    raw_diverse_tail_acc: rawDiverse,
    tail_size: size,
    tail_pairs: tailPairs,
    judged_pairs: pairs.length,
    valid_pairs: valid,
    correct_pairs: correct,
    diverse_pairs: diverseValid,
    top_margin: topMargin,
    signed_top_margin: signedTopMargin,
    kendall_tau: tau,
    ndcg: gain,
  }
}
