/**
 * The search output JSON (`reward-harness search --output`) as its readers parse it: `report`, presets and RM
 * export. The fields they use are checked (a malformed file is refused with the field named); the others are
 * dropped on parse. The writer, `buildSearchOutput` in src/search/output.ts, is type-checked against it.
 */
import { z } from 'zod'
import { SearchRubric } from './search-rubric.ts'

const Counts = z.record(z.string(), z.unknown())

/** One prompt's entry in `best_rubrics`. */
export const BestRubricRecord = z.object({
  prompt_id: z.string().min(1),
  rubric: SearchRubric,
  score: z.number(),
  best_candidate_id: z.string().optional(),
  candidate_scores: z.record(z.string(), z.number()).optional(),
  objective: z
    .object({
      raw_tail_acc: z.number().nullish(),
      kendall_tau: z.number().nullish(),
      ndcg: z.number().nullish(),
      signed_top_margin: z.number().nullish(),
    })
    .optional(),
  history: z.array(z.number()).optional(),
  generations_run: z.number().optional(),
  stop_reason: z.string().optional(),
})

const MarginImprovement = z.object({
  global: z.object({ total_prompts: z.number(), improved_prompts: z.number(), improvement_rate: z.number() }).nullish(),
  per_prompt: z
    .record(z.string(), z.object({ initial_margin: z.number(), final_margin: z.number(), improved: z.boolean() }))
    .nullish(),
})

const SearchDiagnosticsRecord = z.object({
  mode: z.string().nullish(),
  iteration_scope: z.string().nullish(),
  selection_strategy: z.string().nullish(),
  adaptive_mutation: z.string().nullish(),
  avg_diversity: z.number().nullish(),
  generations_run: z.number().nullish(),
  stop_reason: z.string().nullish(),
  objective_summary: z
    .object({
      total: z.number().nullish(),
      raw_tail_acc: z.number().nullish(),
      kendall_tau: z.number().nullish(),
      ndcg: z.number().nullish(),
    })
    .nullish(),
  margin_improvement: MarginImprovement.nullish(),
})

/**
 * A search output file.
 * @example SearchOutputFile.parse(JSON.parse(text)).best_rubrics[0].rubric
 */
export const SearchOutputFile = z.object({
  best_rubrics: z.array(BestRubricRecord),
  best_objective_scores: z.record(z.string(), z.number()),
  search_diagnostics: SearchDiagnosticsRecord.nullish(),
  run_manifest: z.record(z.string(), z.unknown()).nullish(),
  usage: z
    .object({
      backend: z.string().optional(),
      roles: z.record(z.string(), Counts).optional(),
      total: Counts.optional(),
      engine: Counts.optional(),
      cache: Counts.nullish(),
    })
    .nullish(),
})
export type SearchOutputFile = z.infer<typeof SearchOutputFile>
