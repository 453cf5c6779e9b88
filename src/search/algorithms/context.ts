/**
 * What every search algorithm shares: the configuration, the roles behind one concurrency limiter, the grade and
 * judge memos, counters, progress reporting and cancellation; plus scoring a rubric on a prompt at a fidelity.
 */
import type { SearchConfig } from '../config.ts'
import { Evaluator, rubricKey, type RubricEvaluation } from '../evaluator.ts'
import { computeObjective, JudgeMemo, type ObjectiveResult } from '../objective.ts'
import type { Candidate, MutationMode, PromptItem, SearchRoles } from '../types.ts'
import { isParsedSearchRubric, SearchRubric } from '../../schemas/search-rubric.ts'
import { LlmError } from '../../llm/types.ts'
import { createLimiter, type Limiter } from './concurrency.ts'
import type { Ranked } from './selection.ts'

/** A progress report: what the search is doing and how far along that phase is. */
export interface SearchProgress {
  phase: 'initialize' | 'generation' | 'prompt' | 'finalize'
  /** The prompt concerned; null for a global_batch generation. */
  prompt_id: string | null
  generation: number
  done: number
  total: number
}

/** Role calls and memo hits of one `runSearch` call (not part of the output: a resume changes them). */
export interface SearchStats {
  verifier_calls: number
  grade_memo_hits: number
  invalid_grades: number
  judge_calls: number
  judge_memo_hits: number
  proposer_calls: number
  /** Proposals dropped because the proposer's replies stayed unusable (invalid or breaking their mode's contract). */
  proposer_refused: number
  initializer_calls: number
}

/** How faithfully a rubric is scored: votes per candidate, and the judge-pair budget (0 = every tail pair). */
export interface Fidelity {
  votes: number
  budget: number
}

/** A rubric with its evaluation and objective on one prompt. */
export interface ScoredRubric extends Ranked {
  objective: ObjectiveResult
  evaluation: RubricEvaluation
}

export interface SearchContext {
  readonly config: SearchConfig
  readonly roles: SearchRoles
  readonly limit: Limiter
  readonly evaluator: Evaluator
  readonly judges: JudgeMemo
  readonly signal: AbortSignal | undefined
  readonly counters: { proposer_calls: number; proposer_refused: number; initializer_calls: number }
  /** Prompts left out of the output because the model's replies for them stayed unusable, and why. */
  readonly dropped: DroppedPrompt[]
  progress(event: SearchProgress): void
}

/** A prompt the search went on without. */
export interface DroppedPrompt {
  prompt_id: string
  reason: string
}

/**
 * A context for one search: one limiter shared by every role call, fresh memos (load a checkpoint's into them).
 * @example const ctx = createContext(config, roles, { signal, onProgress })
 */
export function createContext(
  config: SearchConfig,
  roles: SearchRoles,
  options: { signal?: AbortSignal; onProgress?: (event: SearchProgress) => void } = {},
): SearchContext {
  const limit = createLimiter(config.concurrency, options.signal)
  return {
    config,
    roles,
    limit,
    evaluator: new Evaluator({ verifier: roles.verifier, limit, seed: config.seed }),
    judges: new JudgeMemo(roles.judge, limit),
    signal: options.signal,
    counters: { proposer_calls: 0, proposer_refused: 0, initializer_calls: 0 },
    dropped: [],
    progress: (event) => options.onProgress?.(event),
  }
}

/**
 * The counters of a context, as one object.
 * @example statsOf(ctx).verifier_calls
 */
export function statsOf(ctx: SearchContext): SearchStats {
  return {
    ...ctx.evaluator.stats,
    judge_calls: ctx.judges.judge_calls,
    judge_memo_hits: ctx.judges.memo_hits,
    ...ctx.counters,
  }
}

/**
 * Throws the signal's reason when the search was aborted.
 * @example throwIfAborted(ctx) // at every boundary
 */
export function throwIfAborted(ctx: SearchContext): void {
  if (ctx.signal?.aborted) throw ctx.signal.reason
}

/**
 * The votes a rubric is graded with at full fidelity: the config's override, else the rubric's protocol.
 * @example fullFidelity(ctx, rubric) // { votes: 3, budget: 0 }
 */
export function fullFidelity(ctx: SearchContext, rubric: SearchRubric): Fidelity {
  return { votes: ctx.config.num_votes ?? rubric.grading_protocol.num_votes, budget: ctx.config.pair_budget_full }
}

/**
 * Evaluates a rubric on a prompt and computes its objective (full fidelity unless given).
 * @example const scored = await scoreRubric(ctx, item, rubric); scored.total
 */
export async function scoreRubric(
  ctx: SearchContext,
  item: PromptItem,
  rubric: SearchRubric,
  fidelity = fullFidelity(ctx, rubric),
): Promise<ScoredRubric> {
  const evaluation = await ctx.evaluator.evaluate(item, rubric, { votes: fidelity.votes })
  const objective = await computeObjective(item, evaluation, ctx.judges.prefer, ctx.config, { budget: fidelity.budget })
  return { rubric, key: rubricKey(rubric), total: objective.total, objective, evaluation }
}

/**
 * Scores rubrics concurrently and sorts them best first (stable: equal totals keep the given order).
 * @example const population = await scorePopulation(ctx, item, rubrics)
 */
export async function scorePopulation(
  ctx: SearchContext,
  item: PromptItem,
  rubrics: readonly SearchRubric[],
): Promise<ScoredRubric[]> {
  const scored = await Promise.all(rubrics.map((rubric) => scoreRubric(ctx, item, rubric)))
  return scored
    .map((entry, position) => ({ entry, position }))
    .sort((a, b) => b.entry.total - a.entry.total || a.position - b.position)
    .map(({ entry }) => entry)
}

/**
 * The top two candidates under a scored rubric, as dataset candidates.
 * @example const [top, runnerUp] = topTwo(item, scored)
 */
export function topTwo(item: PromptItem, scored: ScoredRubric): [Candidate, Candidate] {
  const [first, second] = scored.evaluation.candidates
  return [item.candidates[first!.index]!, item.candidates[second!.index]!]
}

/**
 * The initializer's rubric for a prompt, validated (defaults applied), through the limiter.
 * @example const base = await initializeRubric(ctx, item)
 */
export async function initializeRubric(ctx: SearchContext, item: PromptItem, seed: number): Promise<SearchRubric> {
  const rubric = await ctx.limit(() => {
    ctx.counters.initializer_calls++
    return ctx.roles.initializer.initialize(item, { seed })
  })
  return validated(rubric, `initializer (prompt ${item.prompt_id})`)
}

/**
 * `work` for one prompt, or undefined when the model's replies for it stayed unusable through the role's retries (an
 * invalid or cut reply, a prompt over its context window): the prompt is dropped, with the reason, and the search goes
 * on with the others. Any other failure (an endpoint down, an abort) fails the search.
 * @example const result = await unlessDropped(ctx, item, () => searchOne(ctx, item))
 */
export async function unlessDropped<T>(
  ctx: SearchContext,
  item: PromptItem,
  work: () => Promise<T>,
): Promise<T | undefined> {
  try {
    return await work()
  } catch (error) {
    if (!(error instanceof LlmError) || (error.kind !== 'invalid_reply' && error.kind !== 'context_length')) throw error
    ctx.dropped.push({ prompt_id: item.prompt_id, reason: error.message })
    return undefined
  }
}

/**
 * A proposer's mutation, validated (defaults applied), through the limiter; undefined when the proposer's replies
 * stayed unusable through its retries (a model that cannot write the mode's rubric): that mutation is dropped and
 * counted, and the search goes on without it. Any other failure (an endpoint down, an abort) fails the search.
 * @example const child = await proposeRubric(ctx, { item, rubric: parent, mode: 'anti_fluff', top, runnerUp, seed })
 */
export async function proposeRubric(
  ctx: SearchContext,
  input: {
    item: PromptItem
    rubric: SearchRubric
    mode: MutationMode
    top: Candidate
    runnerUp: Candidate
    seed: number
  },
): Promise<SearchRubric | undefined> {
  const rubric = await ctx
    .limit(() => {
      ctx.counters.proposer_calls++
      return ctx.roles.proposer.propose(input)
    })
    .catch((error: unknown) => {
      if (!(error instanceof LlmError) || error.kind !== 'invalid_reply') throw error
      ctx.counters.proposer_refused++
      return undefined
    })
  return rubric && validated(rubric, `proposer (prompt ${input.item.prompt_id}, mode ${input.mode})`)
}

function validated(rubric: unknown, origin: string): SearchRubric {
  if (isParsedSearchRubric(rubric)) return rubric
  const parsed = SearchRubric.safeParse(rubric)
  if (parsed.success) return parsed.data
  const problems = parsed.error.issues
    .map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`)
    .join('; ')
  throw new TypeError(`${origin} returned an invalid rubric: ${problems}`)
}
