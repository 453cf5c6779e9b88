/**
 * The offline rubric search: pure TypeScript, all I/O through the four roles and the callbacks.
 *
 *   const { output, state } = await runSearch(dataset, roles, { mode: 'evolutionary', seed: 7 }, { onCheckpoint, signal
 * })
 *
 * Runs are deterministic for deterministic roles (every seed derives from the config seed and content; PRNG draws
 * happen in a fixed order while the role calls themselves run concurrently), and a run resumed from any
 * checkpoint returns exactly what an uninterrupted run returns.
 */
import type { z } from 'zod'
import { AppError } from '../errors/index.ts'
import { LlmError } from '../llm/types.ts'
import { canonicalJson } from '../hash/index.ts'
import {
  createContext,
  scoreRubric,
  statsOf,
  type SearchContext,
  type SearchProgress,
  type SearchStats,
} from './algorithms/context.ts'
import { initializeGlobalBatch, runGlobalBatch, searchPromptLocal } from './algorithms/evolutionary.ts'
import { searchPromptIterative } from './algorithms/iterative.ts'
import type { ScheduleDiagnostics } from './algorithms/mutation-schedule.ts'
import { runPerPrompt } from './algorithms/runner.ts'
import { SEARCH_STATE_VERSION, type GlobalBatchState, type PromptResult, type SearchState } from './algorithms/state.ts'
import { configHash, parseSearchConfig, type SearchConfig, type SearchConfigInput } from './config.ts'
import { buildSearchOutput, type OutputInput, type SearchOutput } from './output.ts'
import { hashHex } from '../hash/index.ts'
import { PreferenceDataset, type SearchRoles } from './types.ts'

export type { SearchProgress, SearchStats } from './algorithms/context.ts'

export type { SearchState } from './algorithms/state.ts'

export * from './config.ts'
export type { SearchOutput } from './output.ts'

export { hashHex } from '../hash/index.ts'

export interface RunSearchOptions {
  onProgress?: (event: SearchProgress) => void
  /**
   * Called with a JSON-safe copy of the state at every boundary (generation for global_batch, prompt otherwise) and
   * once at the end: the copy a stopped run returns as its `state`, so it is read, not changed. Answering 'stop' (or a
   * promise of it) ends the run cleanly right after this checkpoint; any other answer is ignored.
   */
  onCheckpoint?: (state: Readonly<SearchState>) => unknown
  /** A state from `onCheckpoint` (or a previous result) to continue from. */
  resumeFrom?: SearchState
  /** Aborting rejects the run with the signal's reason; the last checkpoint stays valid for a resume. */
  signal?: AbortSignal
}

export interface SearchRunResult {
  /** 'stopped' when a checkpoint callback answered 'stop'; `output` is then null. */
  status: 'completed' | 'stopped'
  output: SearchOutput | null
  state: SearchState
  /** Role calls and memo hits of this call (a resumed run makes fewer). */
  stats: SearchStats
}

/** The reason the engine aborts its own signal with when a checkpoint asks to stop. */
class StopRequested extends Error {
  constructor() {
    super('search stopped at a checkpoint')
    this.name = 'StopRequested'
  }
}

const clone = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T

/**
 * Searches a rubric per prompt of `dataset` with the given roles.
 * @example
 * const { output, state } = await runSearch(dataset, roles, { mode: 'evolutionary', iteration_scope: 'prompt_local' },
 * {   onCheckpoint: (state) => writeFileAtomic('checkpoint.json', JSON.stringify(state)),
 *   onProgress: ({ phase, done, total }) => console.log(phase, done, '/', total),
 * })
 * // later: await runSearch(dataset, roles, sameConfig, { resumeFrom: JSON.parse(saved) }) → the same output
 */
export async function runSearch(
  dataset: z.input<typeof PreferenceDataset>,
  roles: SearchRoles,
  configInput: SearchConfigInput | SearchConfig = {},
  options: RunSearchOptions = {},
): Promise<SearchRunResult> {
  const config = parseSearchConfig(configInput)
  const data = parseDataset(dataset)
  const prompts = data.prompts
  const identity = {
    schema_version: SEARCH_STATE_VERSION,
    config_hash: configHash(config),
    dataset_hash: hashHex(canonicalJson(data)),
    mode: config.mode,
    iteration_scope: config.mode === 'evolutionary' ? config.iteration_scope : null,
  } as const
  const resume = options.resumeFrom ? checkResume(options.resumeFrom, identity) : null

  const controller = new AbortController()
  const stopReason = new StopRequested()
  const forward = () => controller.abort(options.signal!.reason)
  if (options.signal?.aborted) throw options.signal.reason
  options.signal?.addEventListener('abort', forward, { once: true })
  const ctx = createContext(config, roles, { signal: controller.signal, onProgress: options.onProgress })
  if (resume) {
    ctx.evaluator.memo.load(resume.memo.grades)
    ctx.judges.load(resume.memo.judge)
  }

  const snapshot = (parts: StateParts): SearchState =>
    clone({
      ...identity,
      complete: parts.complete,
      memo: { grades: ctx.evaluator.memo.snapshot(), judge: ctx.judges.snapshot() },
      global_batch: parts.global_batch,
      completed_prompts: parts.completed_prompts,
    })
  let last: SearchState | null = resume ? clone(resume) : null
  const checkpoint: Checkpoint = async (parts) => {
    last = snapshot(parts)
    return (await options.onCheckpoint?.(last)) === 'stop'
  }
  const stopped = (): SearchRunResult => ({ status: 'stopped', output: null, state: last!, stats: statsOf(ctx) })

  try {
    const searched =
      config.mode === 'evolutionary' && config.iteration_scope === 'global_batch'
        ? await searchGlobalBatch(ctx, prompts, resume, checkpoint)
        : await searchEachPrompt(ctx, prompts, resume, checkpoint, () => controller.abort(stopReason))
    if (!searched) return stopped()
    const { results, mutationDiagnostics, global, finalParts } = searched
    if (results.length === 0)
      throw new LlmError(
        'invalid_reply',
        `every prompt was dropped: ${ctx.dropped.map((drop) => `${drop.prompt_id}: ${drop.reason}`).join('; ')}`,
      )

    const candidateScores = await candidateScoresOf(ctx, searched.prompts, results)
    const output = buildSearchOutput({
      config,
      results,
      candidate_scores: candidateScores,
      mutation_diagnostics: mutationDiagnostics,
      global,
      dropped: ctx.dropped,
    })
    await checkpoint(finalParts)
    return { status: 'completed', output, state: last!, stats: statsOf(ctx) }
  } catch (error) {
    if (error === stopReason) return stopped()
    throw error
  } finally {
    options.signal?.removeEventListener('abort', forward)
  }
}

type StateParts = Pick<SearchState, 'global_batch' | 'completed_prompts' | 'complete'>
/** Saves a checkpoint of these parts; true when the caller asked to stop there. */
type Checkpoint = (parts: StateParts) => Promise<boolean>

/** What a search mode found, before candidates are scored and the output is built. */
interface Searched {
  /** The prompts searched: the dataset's, less those dropped (`ctx.dropped`). */
  prompts: PreferenceDataset['prompts']
  results: PromptResult[]
  mutationDiagnostics: OutputInput['mutation_diagnostics']
  global?: OutputInput['global']
  finalParts: StateParts
}

/** One population over every prompt, generation by generation (null: stopped at a checkpoint). */
async function searchGlobalBatch(
  ctx: SearchContext,
  prompts: PreferenceDataset['prompts'],
  resume: SearchState | null,
  checkpoint: Checkpoint,
): Promise<Searched | null> {
  let state: GlobalBatchState
  if (resume) state = clone(resume.global_batch!)
  else {
    state = await initializeGlobalBatch(ctx, prompts)
    if (await checkpoint({ global_batch: state, completed_prompts: null, complete: false })) return null
  }
  const kept = prompts.filter((item) => Object.hasOwn(state.populations, item.prompt_id))
  const result = await runGlobalBatch(ctx, kept, state, (current) =>
    checkpoint({ global_batch: current, completed_prompts: null, complete: false }),
  )
  if (!result) return null
  return {
    prompts: kept,
    results: result.results,
    mutationDiagnostics: result.mutation_diagnostics,
    global: {
      generations_run: result.state.generation,
      stop_reason: result.state.stop_reason!,
      batches: result.state.batches,
    },
    finalParts: { global_batch: result.state, completed_prompts: null, complete: true },
  }
}

/** Each prompt searched on its own, iteratively or by a local population (null: stopped at a checkpoint). */
async function searchEachPrompt(
  ctx: SearchContext,
  prompts: PreferenceDataset['prompts'],
  resume: SearchState | null,
  checkpoint: Checkpoint,
  stop: () => void,
): Promise<Searched | null> {
  const { config } = ctx
  const completed: Record<string, PromptResult> = resume ? clone(resume.completed_prompts!) : {}
  const searchOne = config.mode === 'iterative' ? searchPromptIterative : searchPromptLocal
  const finished = await runPerPrompt(
    ctx,
    prompts,
    completed,
    searchOne,
    (done) => checkpoint({ global_batch: null, completed_prompts: done, complete: false }),
    stop,
  )
  if (!finished) return null
  const kept = prompts.filter((item) => Object.hasOwn(completed, item.prompt_id))
  const results = kept.map((item) => completed[item.prompt_id]!)
  const mutationDiagnostics =
    config.mode === 'evolutionary'
      ? (Object.fromEntries(results.map((result) => [result.prompt_id, result.mutation_diagnostics!])) as Record<
          string,
          ScheduleDiagnostics
        >)
      : null
  return {
    prompts: kept,
    results,
    mutationDiagnostics,
    finalParts: { global_batch: null, completed_prompts: completed, complete: true },
  }
}

/** Candidate scores under each prompt's best rubric at full fidelity (memo hits: the search graded them). */
async function candidateScoresOf(ctx: SearchContext, prompts: PreferenceDataset['prompts'], results: PromptResult[]) {
  const scored = await Promise.all(prompts.map((item, i) => scoreRubric(ctx, item, results[i]!.best_rubric)))
  return Object.fromEntries(
    prompts.map((item, i) => [
      item.prompt_id,
      scored[i]!.evaluation.candidates.map(({ candidate_id, score }) => ({ candidate_id, score })),
    ]),
  )
}

function parseDataset(dataset: unknown): PreferenceDataset {
  const parsed = PreferenceDataset.safeParse(dataset)
  if (!parsed.success) {
    const problems = parsed.error.issues
      .map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`)
      .join('; ')
    throw new AppError('invalid_request', `search dataset: ${problems}`)
  }
  const seen = new Set<string>()
  for (const item of parsed.data.prompts) {
    if (seen.has(item.prompt_id))
      throw new AppError('invalid_request', `search dataset: duplicate prompt_id "${item.prompt_id}"`)
    seen.add(item.prompt_id)
    const ids = new Set(item.candidates.map((candidate) => candidate.candidate_id))
    if (ids.size !== item.candidates.length)
      throw new AppError('invalid_request', `search dataset: duplicate candidate_id in prompt "${item.prompt_id}"`)
  }
  return parsed.data
}

function checkResume(
  state: SearchState,
  identity: Pick<SearchState, 'schema_version' | 'config_hash' | 'dataset_hash' | 'mode' | 'iteration_scope'>,
): SearchState {
  for (const field of ['schema_version', 'config_hash', 'dataset_hash', 'mode', 'iteration_scope'] as const) {
    if (state?.[field] !== identity[field]) {
      throw new AppError(
        'invalid_request',
        `resume: the checkpoint's ${field} (${String(state?.[field])}) does not match this run's (` +
          `${String(identity[field])})`,
      )
    }
  }
  const globalBatch = identity.mode === 'evolutionary' && identity.iteration_scope === 'global_batch'
  if (globalBatch ? !state.global_batch : !state.completed_prompts)
    throw new AppError('invalid_request', 'resume: the checkpoint holds no state for this search scope')
  return state
}
