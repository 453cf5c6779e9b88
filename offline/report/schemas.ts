/**
 * What the report reads of each input, as loose zod schemas: the fields it renders are checked (so a malformed
 * file is refused with the field named), everything else passes through untouched.
 */
import { z } from 'zod'
import { BestRubricFields, SearchOutputFile } from '../../src/search/output.ts'

const Interval = z.tuple([z.number(), z.number()]).nullable()
const Counts = z.record(z.string(), z.unknown())

/** One search output (`reward-harness search --output`). */
export const SearchOutputInput = SearchOutputFile.extend({
  best_rubrics: z.array(
    BestRubricFields.extend({
      objective: z
        .looseObject({
          raw_tail_acc: z.number().nullish(),
          kendall_tau: z.number().nullish(),
          ndcg: z.number().nullish(),
          signed_top_margin: z.number().nullish(),
        })
        .optional(),
      history: z.array(z.number()).optional(),
      generations_run: z.number().optional(),
      stop_reason: z.string().optional(),
    }),
  ),
  search_diagnostics: z
    .looseObject({
      mode: z.string().nullish(),
      iteration_scope: z.string().nullish(),
      selection_strategy: z.string().nullish(),
      adaptive_mutation: z.string().nullish(),
      avg_diversity: z.number().nullish(),
      generations_run: z.number().nullish(),
      stop_reason: z.string().nullish(),
      objective_summary: z
        .looseObject({
          total: z.number().nullish(),
          raw_tail_acc: z.number().nullish(),
          kendall_tau: z.number().nullish(),
          ndcg: z.number().nullish(),
        })
        .nullish(),
      margin_improvement: z
        .looseObject({
          global: z
            .looseObject({ total_prompts: z.number(), improved_prompts: z.number(), improvement_rate: z.number() })
            .nullish(),
          per_prompt: z
            .record(
              z.string(),
              z.looseObject({ initial_margin: z.number(), final_margin: z.number(), improved: z.boolean() }),
            )
            .nullish(),
        })
        .nullish(),
    })
    .nullish(),
  run_manifest: z.record(z.string(), z.unknown()).nullish(),
  usage: z
    .looseObject({
      backend: z.string().optional(),
      roles: z.record(z.string(), Counts).optional(),
      total: Counts.optional(),
      engine: Counts.optional(),
      cache: Counts.nullish(),
    })
    .nullish(),
})
export type SearchOutputInput = z.infer<typeof SearchOutputInput>

/** One line of `evolution-log.jsonl` (`reward-harness evolve`). */
export const EvolutionLogLine = z.looseObject({
  iteration: z.number().int().min(0),
  change: z.looseObject({ key: z.string(), op: z.string(), rationale: z.string() }).nullable(),
  decision: z.string(),
  train_accuracy: z.number().nullable(),
  val_accuracy: z.number().nullable(),
  state_val_accuracy: z.number(),
  best_val_accuracy: z.number(),
  best_iteration: z.number(),
  best_library_sha256: z.string().optional(),
  failures: z.looseObject({ train: z.number(), val: z.number() }).optional(),
  /** Items whose two presentation orders disagreed (train, val): wrong, never ties. */
  inconsistent: z.looseObject({ train: z.number(), val: z.number() }).optional(),
  /** Model calls and tokens of the iteration per role (router, sub_agent, tool, chain_analyzer, evolver, total). */
  usage: z.record(z.string(), z.record(z.string(), z.unknown())).optional(),
  tool_calls: z.looseObject({ train: z.number(), val: z.number() }).optional(),
  analysis_summary: z.string().optional(),
  note: z.string().optional(),
  pruned: z.looseObject({ removed: z.array(z.string()), decision: z.string(), val_accuracy: z.number() }).nullish(),
  entries: z.array(z.string()),
  library_sha256: z.string().optional(),
  settings: z.record(z.string(), z.unknown()).optional(),
  timestamp: z.string().optional(),
})
export type EvolutionLogLine = z.infer<typeof EvolutionLogLine>

const Accuracy = z.looseObject({
  n: z.number(),
  correct: z.number(),
  wrong: z.number(),
  ties: z.number(),
  failures: z.number(),
  accuracy: z.number().nullable(),
  ci95: Interval,
  bootstrap95: Interval.optional(),
})
export type AccuracyInput = z.infer<typeof Accuracy>

const Metrics = z.looseObject({
  items: z.number(),
  failed_items: z.number(),
  pairwise: z.looseObject({ ab: Accuracy, ba: Accuracy, swap_consistent: Accuracy }).nullable(),
  kway: Accuracy.nullable(),
  pairs_within_kway: Accuracy.nullish(),
  tail: Accuracy.nullable(),
})
export type MetricsInput = z.infer<typeof Metrics>

/** The JSON of `reward-harness bench --json` (or `--out`). */
export const BenchResultInput = z.looseObject({
  schema_version: z.literal(1),
  dataset: z.looseObject({
    path: z.string(),
    sha256: z.string().optional(),
    shape: z.string().optional(),
    items: z.number(),
    candidates: z.number(),
  }),
  scorer: z.string(),
  model: z.string().optional(),
  seed: z.number().optional(),
  ties: z.string().optional(),
  bootstrap: z.number().optional(),
  overall: Metrics,
  groups: z.record(z.string(), Metrics),
  failures: z.looseObject({
    count: z.number(),
    items: z.number(),
    examples: z.array(z.looseObject({ prompt_id: z.string(), candidate_id: z.string(), error: z.string() })),
  }),
  scores: z
    .array(
      z.looseObject({
        prompt_id: z.string(),
        group: z.string().optional(),
        candidates: z.array(
          z.looseObject({ candidate_id: z.string(), score: z.number().nullable(), error: z.string().optional() }),
        ),
      }),
    )
    .optional(),
  elapsed_ms: z.number().optional(),
})
export type BenchResultInput = z.infer<typeof BenchResultInput>

/**
 * The first problem of a failed parse, as `field.path: message`.
 * @example firstIssue(BenchResultInput.safeParse({}).error!) // 'schema_version: Invalid input: expected 1'
 */
export function firstIssue(error: z.ZodError): string {
  const issue = error.issues[0]
  if (!issue) return 'invalid'
  const path = issue.path
    .map((part) => (typeof part === 'number' ? `[${part}]` : `.${String(part)}`))
    .join('')
    .replace(/^\./, '')
  return `${path || '(root)'}: ${issue.message}`
}
