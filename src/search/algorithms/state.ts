/**
 * The checkpoint state of a search: plain JSON, enough for a resumed run to return exactly what an uninterrupted
 * one would (PRNG and scheduler state, populations, histories, and the grade and judge memos, so no role call is
 * repeated and no answer can change on resume).
 */
import type { IterationScope, SearchMode } from '../config.ts'
import type { ObjectiveResult } from '../objective.ts'
import type { RngState } from '../../hash/index.ts'
import type { CriterionGrades, Preference } from '../types.ts'
import type { SearchRubric } from '../../schemas/search-rubric.ts'
import type { ScheduleDiagnostics, SchedulerState } from './mutation-schedule.ts'

export const SEARCH_STATE_VERSION = 1

/** Why a prompt's (or the global batch's) search ended. */
export type StopReason = 'distinguished' | 'stagnation' | 'generations' | 'iterations'

/** The finished search of one prompt. */
export interface PromptResult {
  prompt_id: string
  best_rubric: SearchRubric
  best_total: number
  best_objective: ObjectiveResult
  /** Best total per generation (evolutionary) or the accepted rubric's total per step (iterative). */
  history: number[]
  /** signed_top_margin of the initializer's rubric, and of the best rubric. */
  initial_margin: number
  final_margin: number
  /** Content diversity of the population per generation (empty for iterative). */
  diversity_history: number[]
  /** prompt_local: the prompt's own scheduler; null otherwise. */
  mutation_diagnostics: ScheduleDiagnostics | null
  generations_run: number
  stop_reason: StopReason
}

/** global_batch progress at a generation boundary. */
export interface GlobalBatchState {
  /** Generations completed. */
  generation: number
  rng: RngState
  scheduler: SchedulerState
  /** Each prompt's population (unscored; scores come back from the memos). */
  populations: Record<string, SearchRubric[]>
  best: Record<string, { rubric: SearchRubric; total: number }>
  history: Record<string, number[]>
  initial_margins: Record<string, number>
  diversity_history: Array<Record<string, number>>
  /** Prompts evolved in each generation, hardest first. */
  batches: string[][]
  stale_rounds: number
  stop_reason: StopReason | null
}

/** The whole checkpoint. */
export interface SearchState {
  schema_version: typeof SEARCH_STATE_VERSION
  config_hash: string
  dataset_hash: string
  mode: SearchMode
  /** null in iterative mode. */
  iteration_scope: IterationScope | null
  /** True once the search finished (the output can be rebuilt from the state without role calls). */
  complete: boolean
  memo: {
    /** Verifier answers by (prompt, candidate, text, rubric content, vote). */
    grades: Record<string, CriterionGrades>
    /** Judge answers by (prompt, first candidate, second candidate) in dataset order. */
    judge: Record<string, Preference>
  }
  /** global_batch only. */
  global_batch: GlobalBatchState | null
  /** prompt_local and iterative: prompts finished so far. */
  completed_prompts: Record<string, PromptResult> | null
}
