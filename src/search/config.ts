/**
 * Every knob of the offline rubric search, with its default (autosr §2.2 objective defaults and the §2.4
 * table, plus the knobs this implementation adds). One flat zod schema: the CLI maps flags onto it 1:1.
 */
import { z } from 'zod'
import { AppError } from '../errors/index.ts'
import { canonicalJson } from '../hash/index.ts'
import { hashHex } from '../hash/index.ts'

export const SEARCH_MODES = ['evolutionary', 'iterative'] as const
export const ITERATION_SCOPES = ['global_batch', 'prompt_local'] as const
export const SELECTION_STRATEGIES = ['rank', 'tournament', 'top_k'] as const
export const ADAPTIVE_MUTATIONS = ['fixed', 'success_feedback', 'exploration_decay', 'diversity_driven'] as const
export type SearchMode = (typeof SEARCH_MODES)[number]
export type IterationScope = (typeof ITERATION_SCOPES)[number]
export type SelectionStrategy = (typeof SELECTION_STRATEGIES)[number]
export type AdaptiveMutation = (typeof ADAPTIVE_MUTATIONS)[number]

const fraction = (fallback: number) => z.number().gt(0).max(1).default(fallback)
const unit = (fallback: number) => z.number().min(0).max(1).default(fallback)
const count = (min: number, fallback: number) => z.number().int().min(min).default(fallback)

/**
 * The search configuration. Parse with {@link parseSearchConfig} for errors that name the field.
 * @example SearchConfig.parse({ mode: 'evolutionary', generations: 4, seed: 11 }).population_size // 8
 */
export const SearchConfig = z
  .object({
    mode: z.enum(SEARCH_MODES).default('evolutionary'),
    seed: z.number().int().min(0).max(0xffffffff).default(7),

    // Iterative baseline (autosr §2.3).
    iterations: count(1, 6),

    // Evolutionary search (autosr §2.4).
    iteration_scope: z.enum(ITERATION_SCOPES).default('global_batch'),
    generations: count(1, 12),
    population_size: count(2, 8),
    mutations_per_round: count(1, 6),
    mutation_parent_count: count(1, 3),
    /** global_batch: how many of the hardest prompts evolve per generation. */
    batch_size: count(1, 3),
    /** Successive halving: the share of children kept at each stage (besides every child that beats the population's worst). */
    survival_fraction: fraction(0.2),
    /** The best `elitism_count` rubrics always survive a population update. */
    elitism_count: count(1, 2),
    /** Stop after this many generations without improving any prompt's best (per prompt in prompt_local). */
    stagnation_generations: count(1, 6),

    selection_strategy: z.enum(SELECTION_STRATEGIES).default('rank'),
    tournament_size: count(2, 3),
    tournament_p: fraction(0.8),
    top_k_ratio: fraction(0.3),
    /** top_k: weight of content diversity against quality when picking parents. */
    diversity_weight: unit(0.3),

    adaptive_mutation: z.enum(ADAPTIVE_MUTATIONS).default('fixed'),
    mutation_window_size: count(1, 10),
    min_mutation_weight: fraction(0.1),
    exploration_phase_ratio: fraction(0.3),
    diversity_threshold: unit(0.05),

    /** prompt_local: finish a prompt once its best rubric is "distinguished" (see `distinguish_min_tail_acc`). */
    stop_when_distinguished: z.boolean().default(true),
    /** The ground-truth best must beat the runner-up by more than this; null = `tie_tolerance`. */
    distinguish_margin: z.number().min(0).nullable().default(null),
    /** …and the raw tail accuracy must reach this (new: autosr only required top-2 separation, §8.4). */
    distinguish_min_tail_acc: unit(0.8),

    // Objective (autosr §2.2).
    tail_fraction: fraction(0.25),
    lambda_var: z.number().min(0).default(0.2),
    mu_diverse: z.number().min(0).default(0.25),
    pair_confidence_prior: z.number().min(0).default(8),
    tie_tolerance: z.number().min(0).default(1e-8),
    /** The tail grows until it holds at least this many pairs, when the prompt has enough candidates (new, §8.3). */
    min_tail_pairs: count(1, 3),
    /** Judge-pair budgets of the successive-halving stages; 0 = every tail pair. */
    pair_budget_small: count(0, 8),
    pair_budget_medium: count(0, 24),
    pair_budget_full: count(0, 0),

    /** Votes per candidate; null = the rubric's `grading_protocol.num_votes`. */
    num_votes: z.number().int().min(1).max(15).nullable().default(null),

    /** Most role calls (verifier, judge, proposer, initializer) in flight at once. Does not change results. */
    concurrency: z.number().int().min(1).max(256).default(8),
    /** prompt_local and iterative: most prompts searched at once. Does not change results. */
    prompt_concurrency: z.number().int().min(1).max(256).default(4),
  })
  .superRefine((config, ctx) => {
    if (config.mutation_parent_count > config.population_size) {
      ctx.addIssue({
        code: 'custom',
        path: ['mutation_parent_count'],
        message: `must be at most population_size (${config.population_size})`,
      })
    }
    if (config.elitism_count > config.population_size) {
      ctx.addIssue({
        code: 'custom',
        path: ['elitism_count'],
        message: `must be at most population_size (${config.population_size})`,
      })
    }
  })
export type SearchConfig = z.infer<typeof SearchConfig>
export type SearchConfigInput = z.input<typeof SearchConfig>

/** Knobs that change how fast a search runs but never what it returns: left out of {@link configHash}. */
const SCHEDULING_KNOBS = ['concurrency', 'prompt_concurrency'] as const

/**
 * Validates a search configuration; the error names every offending field.
 * @example parseSearchConfig({ population_size: 1 }) // throws AppError 'search config: population_size: …'
 */
export function parseSearchConfig(input: unknown): SearchConfig {
  const parsed = SearchConfig.safeParse(input ?? {})
  if (parsed.success) return parsed.data
  const problems = parsed.error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`)
  throw new AppError('invalid_request', `search config: ${problems.join('; ')}`, {
    details: parsed.error.issues.map((issue) => ({ field: issue.path.join('.'), message: issue.message })),
  })
}

/**
 * A stable hash of everything in the configuration that can change a search's result (not its concurrency):
 * a checkpoint records it, and a resume with a different one is refused.
 * @example configHash(parseSearchConfig({ seed: 7 })) === configHash(parseSearchConfig({ seed: 7, concurrency: 32 })) // true
 */
export function configHash(config: SearchConfig): string {
  const relevant: Record<string, unknown> = { ...config }
  for (const knob of SCHEDULING_KNOBS) delete relevant[knob]
  return hashHex(canonicalJson(relevant))
}

/** The objective's knobs, as {@link computeObjective} reads them. */
export type ObjectiveConfig = Pick<
  SearchConfig,
  'tail_fraction' | 'lambda_var' | 'mu_diverse' | 'pair_confidence_prior' | 'tie_tolerance' | 'min_tail_pairs' | 'seed'
>
