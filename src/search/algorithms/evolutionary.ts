/**
 * Evolutionary rubric search (autosr §2.4) in its two iteration scopes.
 * - global_batch: every generation scores all prompts' populations, then evolves the `batch_size` hardest
 *   prompts (hardness + top-1 disagreement) concurrently, with one shared mutation schedule; the whole search
 *   stops after `stagnation_generations` generations in which no prompt's best improved. Checkpoints at every
 *   generation boundary (and after initialisation).
 * - prompt_local: each prompt evolves alone with its own PRNG and schedule, until it is distinguished, stagnates
 *   or runs out of generations. Prompts run concurrently; see runner.ts for the prompt-boundary checkpoints.
 */
import type { SearchConfig } from '../config.ts'
import { populationDiversity } from '../diversity.ts'
import { derivedSeed, Rng } from '../../hash/index.ts'
import type { PromptItem } from '../types.ts'
import { mapConcurrent } from './concurrency.ts'
import {
  initializeRubric,
  scorePopulation,
  scoreRubric,
  throwIfAborted,
  type ScoredRubric,
  type SearchContext,
  unlessDropped,
} from './context.ts'
import { MutationScheduler, type ScheduleDiagnostics, type ScheduleOptions } from './mutation-schedule.ts'
import { executeEvolution, hardness, initialPopulation, isDistinguished, planEvolution } from './population.ts'
import type { GlobalBatchState, PromptResult, StopReason } from './state.ts'

/**
 * The schedule options a search configuration implies.
 * @example new MutationScheduler(scheduleOptions(config))
 * @internal
 */
export function scheduleOptions(config: SearchConfig): ScheduleOptions {
  return {
    kind: config.adaptive_mutation,
    generations: config.generations,
    mutation_window_size: config.mutation_window_size,
    min_mutation_weight: config.min_mutation_weight,
    exploration_phase_ratio: config.exploration_phase_ratio,
    diversity_threshold: config.diversity_threshold,
    tie_tolerance: config.tie_tolerance,
  }
}

/** The result of a global_batch run that was not stopped. */
export interface GlobalBatchResult {
  results: PromptResult[]
  mutation_diagnostics: ScheduleDiagnostics
  state: GlobalBatchState
}

/**
 * The first global_batch state: every prompt's base rubric and initial population (prompts concurrently); a prompt
 * whose model replies stayed unusable is dropped (`ctx.dropped`).
 * @example const state = await initializeGlobalBatch(ctx, dataset.prompts)
 */
export async function initializeGlobalBatch(
  ctx: SearchContext,
  dataset: readonly PromptItem[],
): Promise<GlobalBatchState> {
  let prompts = dataset
  const { config } = ctx
  let done = 0
  const started = await mapConcurrent(prompts, config.prompt_concurrency, async (item) => {
    throwIfAborted(ctx)
    const begun = await unlessDropped(ctx, item, async () => {
      const base = await initializeRubric(ctx, item, derivedSeed(config.seed, 'initialize', item.prompt_id))
      const scoredBase = await scoreRubric(ctx, item, base)
      return {
        population: await initialPopulation(ctx, item, scoredBase),
        margin: scoredBase.objective.signed_top_margin,
      }
    })
    ctx.progress({ phase: 'initialize', prompt_id: item.prompt_id, generation: 0, done: ++done, total: prompts.length })
    return begun && { item, ...begun }
  })
  // A prompt dropped here is no part of the batch: the state, and so a resumed run, holds only the others.
  const initial = started.filter((entry) => entry !== undefined)
  prompts = initial.map((entry) => entry.item)
  return {
    generation: 0,
    rng: Rng.fromSeed(derivedSeed(config.seed, 'global_batch')).state(),
    scheduler: new MutationScheduler(scheduleOptions(config)).state(),
    populations: Object.fromEntries(prompts.map((item, i) => [item.prompt_id, initial[i]!.population])),
    best: {},
    history: Object.fromEntries(prompts.map((item) => [item.prompt_id, []])),
    initial_margins: Object.fromEntries(prompts.map((item, i) => [item.prompt_id, initial[i]!.margin])),
    diversity_history: [],
    batches: [],
    stale_rounds: 0,
    stop_reason: null,
  }
}

/**
 * Runs global_batch generations from `state` (mutated in place) to the end, calling `checkpoint` at every
 * generation boundary; returns null when `checkpoint` asked to stop.
 * @example const result = await runGlobalBatch(ctx, prompts, state, async (s) => (save(s), false))
 */
export async function runGlobalBatch(
  ctx: SearchContext,
  prompts: readonly PromptItem[],
  state: GlobalBatchState,
  checkpoint: (state: GlobalBatchState) => Promise<boolean>,
): Promise<GlobalBatchResult | null> {
  const { config } = ctx
  const tolerance = config.tie_tolerance
  const rng = Rng.fromState(state.rng)
  const scheduler = new MutationScheduler(scheduleOptions(config), state.scheduler)

  while (state.generation < config.generations && state.stop_reason === null) {
    throwIfAborted(ctx)
    const generation = state.generation
    const scored = await Promise.all(
      prompts.map((item) => scorePopulation(ctx, item, state.populations[item.prompt_id]!)),
    )
    const { diversity, improved } = noteGeneration(state, prompts, scored, tolerance)
    state.diversity_history.push(diversity)
    state.stale_rounds = improved ? 0 : state.stale_rounds + 1
    if (state.stale_rounds >= config.stagnation_generations) {
      state.stop_reason = 'stagnation'
      break
    }

    await evolveHardest(ctx, prompts, state, scored, { scheduler, rng, diversity })
    scheduler.advance()
    state.generation = generation + 1
    state.rng = rng.state()
    state.scheduler = scheduler.state()
    ctx.progress({
      phase: 'generation',
      prompt_id: null,
      generation: state.generation,
      done: state.generation,
      total: config.generations,
    })
    if (await checkpoint(state)) return null
  }
  state.stop_reason ??= 'generations'

  const results = await finalizeGlobalBatch(ctx, prompts, state)
  return { results, mutation_diagnostics: scheduler.diagnostics(), state }
}

/** Records a generation's scores: each prompt's best so far, history and diversity; whether any best improved. */
function noteGeneration(
  state: GlobalBatchState,
  prompts: readonly PromptItem[],
  scored: ScoredRubric[][],
  tolerance: number,
): { diversity: Record<string, number>; improved: boolean } {
  const diversity: Record<string, number> = {}
  let improved = false
  for (const [i, item] of prompts.entries()) {
    const id = item.prompt_id
    const best = scored[i]![0]!
    diversity[id] = populationDiversity(scored[i]!.map((member) => member.rubric))
    state.history[id]!.push(best.total)
    const known = state.best[id]
    if (!known || best.total > known.total + tolerance) {
      state.best[id] = { rubric: best.rubric, total: best.total }
      improved = true
    }
  }
  return { diversity, improved }
}

/** Evolves the `batch_size` hardest prompts' populations (in prompt order) and credits the schedule. */
async function evolveHardest(
  ctx: SearchContext,
  prompts: readonly PromptItem[],
  state: GlobalBatchState,
  scored: ScoredRubric[][],
  draw: { scheduler: MutationScheduler; rng: Rng; diversity: Record<string, number> },
): Promise<void> {
  const { scheduler, rng, diversity } = draw
  const byHardness = prompts
    .map((_, i) => ({ i, hardness: hardness(scored[i]!) }))
    .sort((a, b) => b.hardness - a.hardness || a.i - b.i)
    .slice(0, ctx.config.batch_size)
  state.batches.push(byHardness.map(({ i }) => prompts[i]!.prompt_id))
  const plans = byHardness
    .map(({ i }) => i)
    .sort((a, b) => a - b)
    .map((i) =>
      planEvolution(ctx, prompts[i]!, scored[i]!, scheduler, rng, state.generation, diversity[prompts[i]!.prompt_id]!),
    )
  const outcomes = await Promise.all(plans.map((plan) => executeEvolution(ctx, plan)))
  for (const [k, outcome] of outcomes.entries()) {
    state.populations[plans[k]!.item.prompt_id] = outcome.population.map((member) => member.rubric)
    for (const { mode, improvement } of outcome.credits) scheduler.record(mode, improvement)
  }
}

/** Scores each prompt's final population, keeps the best rubric seen, and builds its result. */
function finalizeGlobalBatch(
  ctx: SearchContext,
  prompts: readonly PromptItem[],
  state: GlobalBatchState,
): Promise<PromptResult[]> {
  const tolerance = ctx.config.tie_tolerance
  let done = 0
  return Promise.all(
    prompts.map(async (item) => {
      const id = item.prompt_id
      const final = await scorePopulation(ctx, item, state.populations[id]!)
      const known = state.best[id]
      if (!known || final[0]!.total > known.total + tolerance)
        state.best[id] = { rubric: final[0]!.rubric, total: final[0]!.total }
      const best = await scoreRubric(ctx, item, state.best[id]!.rubric)
      ctx.progress({
        phase: 'finalize',
        prompt_id: id,
        generation: state.generation,
        done: ++done,
        total: prompts.length,
      })
      return promptResult(item, best, {
        history: state.history[id]!,
        initial_margin: state.initial_margins[id]!,
        diversity_history: state.diversity_history.map((entry) => entry[id]!),
        mutation_diagnostics: null,
        generations_run: state.generation,
        stop_reason: state.stop_reason!,
      })
    }),
  )
}

/**
 * The prompt_local search of one prompt: its own PRNG and schedule; stops when distinguished, stagnant or done.
 * @example const result = await searchPromptLocal(ctx, item)
 */
export async function searchPromptLocal(ctx: SearchContext, item: PromptItem): Promise<PromptResult> {
  const { config } = ctx
  const tolerance = config.tie_tolerance
  const rng = Rng.fromSeed(derivedSeed(config.seed, 'prompt_local', item.prompt_id))
  const scheduler = new MutationScheduler(scheduleOptions(config))
  const base = await initializeRubric(ctx, item, derivedSeed(config.seed, 'initialize', item.prompt_id))
  const scoredBase = await scoreRubric(ctx, item, base)
  let population = await initialPopulation(ctx, item, scoredBase)

  let best: ScoredRubric | null = null
  const history: number[] = []
  const diversityHistory: number[] = []
  let stale = 0
  let stopReason: StopReason = 'generations'
  let generationsRun = 0
  for (let generation = 0; generation < config.generations; generation++) {
    throwIfAborted(ctx)
    const scored = await scorePopulation(ctx, item, population)
    const diversity = populationDiversity(population)
    diversityHistory.push(diversity)
    history.push(scored[0]!.total)
    const improved = best === null || scored[0]!.total > best.total + tolerance
    if (improved) best = scored[0]!
    generationsRun = generation + 1
    ctx.progress({
      phase: 'prompt',
      prompt_id: item.prompt_id,
      generation,
      done: generationsRun,
      total: config.generations,
    })
    if (isDistinguished(best!.objective, config)) {
      stopReason = 'distinguished'
      break
    }
    stale = improved ? 0 : stale + 1
    if (stale >= config.stagnation_generations) {
      stopReason = 'stagnation'
      break
    }
    const outcome = await executeEvolution(ctx, planEvolution(ctx, item, scored, scheduler, rng, generation, diversity))
    for (const { mode, improvement } of outcome.credits) scheduler.record(mode, improvement)
    scheduler.advance()
    population = outcome.population.map((member) => member.rubric)
  }
  const final = await scorePopulation(ctx, item, population)
  if (best === null || final[0]!.total > best.total + tolerance) best = final[0]!
  return promptResult(item, best, {
    history,
    initial_margin: scoredBase.objective.signed_top_margin,
    diversity_history: diversityHistory,
    mutation_diagnostics: scheduler.diagnostics(),
    generations_run: generationsRun,
    stop_reason: stopReason,
  })
}

/**
 * A finished prompt's record from its best scored rubric and its search trace.
 * @example promptResult(item, best, { history, initial_margin, diversity_history: [], mutation_diagnostics: null,
 *   generations_run: 6, stop_reason: 'iterations' })
 */
export function promptResult(
  item: PromptItem,
  best: ScoredRubric,
  trace: Omit<PromptResult, 'prompt_id' | 'best_rubric' | 'best_total' | 'best_objective' | 'final_margin'>,
): PromptResult {
  return {
    prompt_id: item.prompt_id,
    best_rubric: best.rubric,
    best_total: best.total,
    best_objective: best.objective,
    final_margin: best.objective.signed_top_margin,
    ...trace,
  }
}
