/**
 * The iterative baseline (autosr §2.3): one rubric per prompt, mutated `iterations` times through the modes in
 * order, each step contrasting the top two candidates under the current rubric; a proposal replaces the current
 * rubric when it scores at least as well, so the history (the current total before each step) never decreases.
 */
import { derivedSeed } from '../../hash/index.ts'
import { MUTATION_MODES, type PromptItem } from '../types.ts'
import { initializeRubric, proposeRubric, scoreRubric, throwIfAborted, topTwo, type SearchContext } from './context.ts'
import { promptResult } from './evolutionary.ts'
import type { PromptResult } from './state.ts'

/**
 * Searches one prompt iteratively.
 * @example const result = await searchPromptIterative(ctx, item); result.history // non-decreasing
 */
export async function searchPromptIterative(ctx: SearchContext, item: PromptItem): Promise<PromptResult> {
  const { config } = ctx
  const base = await initializeRubric(ctx, item, derivedSeed(config.seed, 'initialize', item.prompt_id))
  const initial = await scoreRubric(ctx, item, base)
  let current = initial
  let best = initial
  const history: number[] = []
  for (let step = 0; step < config.iterations; step++) {
    throwIfAborted(ctx)
    history.push(current.total)
    const [top, runnerUp] = topTwo(item, current)
    const mode = MUTATION_MODES[step % MUTATION_MODES.length]!
    const proposal = await proposeRubric(ctx, {
      item,
      rubric: current.rubric,
      mode,
      top,
      runnerUp,
      seed: derivedSeed(config.seed, 'iterate', item.prompt_id, step),
    })
    if (proposal) {
      const scored = await scoreRubric(ctx, item, proposal)
      if (scored.total > best.total + config.tie_tolerance) best = scored
      if (scored.total >= current.total) current = scored
    }
    ctx.progress({
      phase: 'prompt',
      prompt_id: item.prompt_id,
      generation: step,
      done: step + 1,
      total: config.iterations,
    })
  }
  return promptResult(item, best, {
    history,
    initial_margin: initial.objective.signed_top_margin,
    diversity_history: [],
    mutation_diagnostics: null,
    generations_run: config.iterations,
    stop_reason: 'iterations',
  })
}
