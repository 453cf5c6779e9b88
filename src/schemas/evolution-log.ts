/**
 * One line of `evolution-log.jsonl`, written by `reward-harness evolve` (one line per iteration) and read back by
 * its resume, `reward-harness report` and `reward-harness export --library`.
 */
import { z } from 'zod'

/** What an iteration did with its proposed change; `rejected`: it failed the tool-prompt check, never validated. */
export const EVOLVE_DECISIONS = ['baseline', 'kept', 'rolled_back', 'skipped', 'rejected'] as const
export type EvolveDecision = (typeof EVOLVE_DECISIONS)[number]

/** `both`: judge A/B and B/A, a verdict only when they agree; `one`: A/B only, with swap-augmented train. */
export const JUDGE_ORDERS = ['both', 'one'] as const
export type JudgeOrders = (typeof JUDGE_ORDERS)[number]

const TrainVal = z.object({ train: z.number(), val: z.number() })

/** One role's model calls and tokens; `calls` = ok + failures. */
export const EvolveRoleUsage = z.object({
  calls: z.number(),
  ok: z.number(),
  failures: z.number(),
  invalid_replies: z.number(),
  cached: z.number(),
  prompt_tokens: z.number(),
  completion_tokens: z.number(),
})

/** The tool-prompt check of one tool: how many sampled sub-calls replied JSON. */
export const ToolCheckRecord = z.object({
  tool: z.string(),
  sampled: z.number(),
  json: z.number(),
  passed: z.boolean(),
  examples: z.array(z.string()),
})

/** The settings of a run; a resume must match its seed, split, dataset and orders. */
export const EvolveSettings = z.object({
  seed: z.number(),
  val_fraction: z.number(),
  explore_margin: z.number(),
  prune_every: z.number(),
  dataset_sha256: z.string(),
  train: z.number(),
  validation: z.number(),
  orders: z.enum(JUDGE_ORDERS),
  tool_check_sample: z.number(),
  images: z.number(),
})

/**
 * One iteration of an evolution run, as logged.
 * @example EvolutionLogEntry.parse(JSON.parse(line)).best_val_accuracy
 */
export const EvolutionLogEntry = z.object({
  iteration: z.number().int().min(0),
  change: z.object({ key: z.string(), op: z.string(), rationale: z.string() }).nullable(),
  decision: z.enum(EVOLVE_DECISIONS),
  train_accuracy: z.number().nullable(),
  val_accuracy: z.number().nullable(),
  /** Validation accuracy of the state the iteration ends with. */
  state_val_accuracy: z.number(),
  best_val_accuracy: z.number(),
  best_iteration: z.number(),
  /** Content hash of checkpoints/best when this line was written; resume repairs a best dir that disagrees. */
  best_library_sha256: z.string(),
  failures: TrainVal,
  /** Items whose two orders disagreed (train, val); counted wrong, never ties. */
  inconsistent: TrainVal,
  /** Tool sub-calls made while judging (train, val). */
  tool_calls: TrainVal,
  /** The tool-prompt check of a change that adds a tool or changes a tool's prompt. */
  tool_check: z.array(ToolCheckRecord).optional(),
  /** Model calls and tokens of this iteration per role (router, sub_agent, tool, chain_analyzer, evolver, total). */
  usage: z.object({
    router: EvolveRoleUsage,
    sub_agent: EvolveRoleUsage,
    tool: EvolveRoleUsage,
    chain_analyzer: EvolveRoleUsage,
    evolver: EvolveRoleUsage,
    total: EvolveRoleUsage,
  }),
  analysis_summary: z.string().optional(),
  note: z.string().optional(),
  pruned: z
    .object({ removed: z.array(z.string()), decision: z.enum(['kept', 'rolled_back']), val_accuracy: z.number() })
    .nullish(),
  entries: z.array(z.string()),
  library_sha256: z.string(),
  settings: EvolveSettings,
  timestamp: z.string(),
})
export type EvolutionLogEntry = z.infer<typeof EvolutionLogEntry>
