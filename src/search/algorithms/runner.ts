/**
 * Runs an independent per-prompt search (prompt_local or iterative) over a dataset: up to `prompt_concurrency`
 * prompts at once, a checkpoint at every prompt boundary (one per finished prompt, in completion order), and a
 * clean stop when a checkpoint asks for one. Every prompt's search depends only on its own seeds and the memos,
 * so which prompts were finished when the run stopped never changes the final result.
 */
import type { PromptItem } from '../types.ts'
import { mapConcurrent } from './concurrency.ts'
import { type SearchContext, unlessDropped } from './context.ts'
import type { PromptResult } from './state.ts'

/**
 * Searches every prompt not yet in `completed` (which is filled in place); a prompt whose model replies stayed
 * unusable is dropped (`ctx.dropped`) and the others go on. Returns false when a checkpoint asked
 * to stop; `stop()` must abort the context's signal so prompts still running end early.
 * @example const finished = await runPerPrompt(ctx, prompts, {}, searchPromptLocal, checkpoint, stop)
 */
export async function runPerPrompt(
  ctx: SearchContext,
  prompts: readonly PromptItem[],
  completed: Record<string, PromptResult>,
  searchOne: (ctx: SearchContext, item: PromptItem) => Promise<PromptResult>,
  checkpoint: (completed: Record<string, PromptResult>) => Promise<boolean>,
  stop: () => void,
): Promise<boolean> {
  const todo = prompts.filter((item) => !Object.hasOwn(completed, item.prompt_id))
  let stopping = false
  let boundary: Promise<void> = Promise.resolve()
  try {
    await mapConcurrent(todo, ctx.config.prompt_concurrency, async (item) => {
      if (stopping) return
      const result = await unlessDropped(ctx, item, () => searchOne(ctx, item))
      if (!result) return
      boundary = boundary.then(async () => {
        if (stopping) return
        completed[item.prompt_id] = result
        const done = prompts.filter((prompt) => Object.hasOwn(completed, prompt.prompt_id)).length
        ctx.progress({
          phase: 'finalize',
          prompt_id: item.prompt_id,
          generation: result.generations_run,
          done,
          total: prompts.length,
        })
        if (await checkpoint(completed)) {
          stopping = true
          stop()
        }
      })
      await boundary
    })
  } catch (error) {
    if (stopping) return false
    throw error
  }
  return !stopping
}
