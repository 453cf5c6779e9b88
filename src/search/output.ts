/**
 * The search output JSON (autosr §1.3): the best rubric per prompt with its objective and candidate scores, and
 * the search diagnostics. `run_manifest` and `usage` are placeholders the CLI fills.
 */
import type { z } from 'zod'
import type { SearchOutputFile } from '../schemas/search-output.ts'
import type { DroppedPrompt } from './algorithms/context.ts'
import type { ScheduleDiagnostics } from './algorithms/mutation-schedule.ts'
import type { PromptResult, StopReason } from './algorithms/state.ts'
import type { SearchConfig } from './config.ts'
import type { ObjectiveResult } from './objective.ts'
import type { SearchRubric } from '../schemas/search-rubric.ts'
import { mean } from '../stats/index.ts'

/** One prompt's entry in `best_rubrics`. */
interface BestRubricEntry {
  prompt_id: string
  rubric: SearchRubric
  /** The objective total of the rubric. */
  score: number
  best_candidate_id: string
  /**
   * Rubric score in [0, 1] per candidate, inserted best first (mind that integer-like ids sort numerically in JS
   * objects).
   */
  candidate_scores: Record<string, number>
  /** The full objective breakdown, with Kendall's tau and NDCG against the ground truth. */
  objective: ObjectiveResult
  history: number[]
  generations_run: number
  stop_reason: StopReason
}

interface MarginEntry {
  initial_margin: number
  final_margin: number
  margin_delta: number
  improved: boolean
}

interface SearchDiagnostics {
  mode: SearchConfig['mode']
  iteration_scope: SearchConfig['iteration_scope'] | null
  selection_strategy: SearchConfig['selection_strategy'] | null
  adaptive_mutation: SearchConfig['adaptive_mutation'] | null
  /** global_batch: the shared schedule's; prompt_local: per prompt; iterative: null. */
  mutation_diagnostics: ScheduleDiagnostics | Record<string, ScheduleDiagnostics> | null
  /** Mean content diversity of the populations over all generations; null for iterative. */
  avg_diversity: number | null
  /** Margins are signed: score(ground-truth best) − score(ground-truth runner-up) (top margin without labels). */
  margin_improvement: {
    global: { total_prompts: number; improved_prompts: number; improvement_rate: number }
    per_prompt: Record<string, MarginEntry>
  }
  /** Means over prompts of the best rubrics' objective parts (null entries skipped). */
  objective_summary: {
    total: number | null
    raw_tail_acc: number | null
    kendall_tau: number | null
    ndcg: number | null
  }
  /** global_batch: generations run, why the search stopped, and the prompts evolved per generation. */
  generations_run: number | null
  stop_reason: StopReason | null
  batches: string[][] | null
  /** Prompts the search went on without (the model's replies for them stayed unusable), and why; no best rubric. */
  dropped_prompts: DroppedPrompt[]
}

export interface SearchOutput {
  best_rubrics: BestRubricEntry[]
  best_objective_scores: Record<string, number>
  search_diagnostics: SearchDiagnostics
  run_manifest: Record<string, unknown> | null
  usage: Record<string, unknown> | null
}

export interface OutputInput {
  config: SearchConfig
  results: readonly PromptResult[]
  /** Per prompt, candidate scores under the best rubric, best first. */
  candidate_scores: Record<string, Array<{ candidate_id: string; score: number }>>
  mutation_diagnostics: SearchDiagnostics['mutation_diagnostics']
  global?: { generations_run: number; stop_reason: StopReason; batches: string[][] }
  dropped?: readonly DroppedPrompt[]
}

const meanOfFinite = (values: Array<number | null>) =>
  mean(values.filter((value): value is number => value !== null && Number.isFinite(value)))

/**
 * Builds the output JSON from finished prompt results (entries sorted by prompt_id).
 * @example const output = buildSearchOutput({ config, results, candidate_scores, mutation_diagnostics: null })
 */
export function buildSearchOutput(input: OutputInput): SearchOutput {
  const { config } = input
  const results = [...input.results].sort((a, b) =>
    a.prompt_id < b.prompt_id ? -1 : a.prompt_id > b.prompt_id ? 1 : 0,
  )
  const evolutionary = config.mode === 'evolutionary'
  const perPrompt: Record<string, MarginEntry> = {}
  for (const result of results) {
    const delta = result.final_margin - result.initial_margin
    perPrompt[result.prompt_id] = {
      initial_margin: result.initial_margin,
      final_margin: result.final_margin,
      margin_delta: delta,
      improved: delta > config.tie_tolerance,
    }
  }
  const improved = Object.values(perPrompt).filter((entry) => entry.improved).length
  const output: SearchOutput = {
    best_rubrics: results.map((result) => {
      const scores = input.candidate_scores[result.prompt_id] ?? []
      return {
        prompt_id: result.prompt_id,
        rubric: result.best_rubric,
        score: result.best_total,
        best_candidate_id: scores[0]?.candidate_id ?? '',
        candidate_scores: Object.fromEntries(scores.map(({ candidate_id, score }) => [candidate_id, score])),
        objective: result.best_objective,
        history: result.history,
        generations_run: result.generations_run,
        stop_reason: result.stop_reason,
      }
    }),
    best_objective_scores: Object.fromEntries(results.map((result) => [result.prompt_id, result.best_total])),
    search_diagnostics: {
      mode: config.mode,
      iteration_scope: evolutionary ? config.iteration_scope : null,
      selection_strategy: evolutionary ? config.selection_strategy : null,
      adaptive_mutation: evolutionary ? config.adaptive_mutation : null,
      mutation_diagnostics: input.mutation_diagnostics,
      avg_diversity: evolutionary ? meanOfFinite(results.flatMap((result) => result.diversity_history)) : null,
      margin_improvement: {
        global: {
          total_prompts: results.length,
          improved_prompts: improved,
          improvement_rate: results.length ? improved / results.length : 0,
        },
        per_prompt: perPrompt,
      },
      objective_summary: {
        total: meanOfFinite(results.map((result) => result.best_total)),
        raw_tail_acc: meanOfFinite(results.map((result) => result.best_objective.raw_tail_acc)),
        kendall_tau: meanOfFinite(results.map((result) => result.best_objective.kendall_tau)),
        ndcg: meanOfFinite(results.map((result) => result.best_objective.ndcg)),
      },
      generations_run: input.global?.generations_run ?? null,
      stop_reason: input.global?.stop_reason ?? null,
      batches: input.global?.batches ?? null,
      dropped_prompts: [...(input.dropped ?? [])].sort((a, b) => (a.prompt_id < b.prompt_id ? -1 : 1)),
    },
    run_manifest: null,
    usage: null,
  }
  // What is written must be what the readers' schema accepts: a type error here means the two drifted.
  return output satisfies z.input<typeof SearchOutputFile>
}
