/**
 * Every knob of the offline rubric search, with its default (autosr §2.2 objective defaults and the §2.4
 * table, plus the knobs this implementation adds). One flat zod schema: each knob carries its `--help` line
 * and section as metadata, and the CLI derives one flag per knob from it.
 */
import { z } from 'zod'
import { AppError } from '../errors/index.ts'
import { canonicalJson } from '../hash/index.ts'
import { hashHex } from '../hash/index.ts'

const SEARCH_MODES = ['evolutionary', 'iterative'] as const
const ITERATION_SCOPES = ['global_batch', 'prompt_local'] as const
const SELECTION_STRATEGIES = ['rank', 'tournament', 'top_k'] as const
const ADAPTIVE_MUTATIONS = ['fixed', 'success_feedback', 'exploration_decay', 'diversity_driven'] as const
export type SearchMode = (typeof SEARCH_MODES)[number]
export type IterationScope = (typeof ITERATION_SCOPES)[number]
export type SelectionStrategy = (typeof SELECTION_STRATEGIES)[number]
export type AdaptiveMutation = (typeof ADAPTIVE_MUTATIONS)[number]

/** The `--help` sections of the knobs, in the order they are listed, with their titles. */
export const KNOB_GROUPS = {
  search: 'search',
  evolution: 'evolutionary search',
  selection: 'parent selection',
  mutation: 'mutation schedule',
  stopping: 'stopping',
  objective: 'objective and fidelity',
  scheduling: 'scheduling',
} as const
type KnobGroup = keyof typeof KNOB_GROUPS

/** What `reward-harness search` shows of a knob: its flag (`--` + the key in kebab case) is listed with these. */
export type KnobMeta = { group: KnobGroup; help: string }

/** The CLI metadata of a knob, attached with zod's `.meta()`: the flags are derived from the schema. */
const cli = (group: KnobGroup, help: string): KnobMeta => ({ group, help })

const fraction = (fallback: number) => z.number().gt(0).max(1).default(fallback)
const unit = (fallback: number) => z.number().min(0).max(1).default(fallback)
const count = (min: number, fallback: number) => z.number().int().min(min).default(fallback)

/**
 * The search configuration. Parse with {@link parseSearchConfig} for errors that name the field.
 * @example SearchConfig.parse({ mode: 'evolutionary', generations: 4, seed: 11 }).population_size // 8
 */
export const SearchConfig = z
  .object({
    mode: z.enum(SEARCH_MODES).default('evolutionary').meta(cli('search', 'search algorithm')),
    seed: z
      .number()
      .int()
      .min(0)
      .max(0xffffffff)
      .default(7)
      .meta(
        cli('search', 'seed of every random draw (and, on openai, the sampling seed of requests without their own)'),
      ),

    // Iterative baseline (autosr §2.3).
    iterations: count(1, 6).meta(cli('search', 'iterative mode: improvement steps per prompt')),

    // Evolutionary search (autosr §2.4).
    iteration_scope: z
      .enum(ITERATION_SCOPES)
      .default('global_batch')
      .meta(cli('evolution', 'evolve the hardest prompts together per generation, or one prompt at a time')),
    generations: count(1, 12).meta(cli('evolution', 'most generations (per prompt in prompt_local)')),
    population_size: count(2, 8).meta(cli('evolution', 'rubrics kept per prompt')),
    mutations_per_round: count(1, 6).meta(cli('evolution', 'children proposed per parent and generation')),
    mutation_parent_count: count(1, 3).meta(
      cli('evolution', 'parents selected per generation (at most the population size)'),
    ),
    /** global_batch: how many of the hardest prompts evolve per generation. */
    batch_size: count(1, 3).meta(cli('evolution', 'global_batch: hardest prompts evolved per generation')),
    /**
     * Successive halving: the share of children kept at each stage (besides every child that beats the population's
     * worst).
     */
    survival_fraction: fraction(0.2).meta(
      cli('evolution', 'successive halving: share of children kept at each stage, in (0, 1]'),
    ),
    /** The best `elitism_count` rubrics always survive a population update. */
    elitism_count: count(1, 2).meta(cli('evolution', 'best rubrics that always survive a population update')),
    /** Stop after this many generations without improving any prompt's best (per prompt in prompt_local). */
    stagnation_generations: count(1, 6).meta(
      cli('stopping', "stop after this many generations without improving any prompt's best"),
    ),

    selection_strategy: z.enum(SELECTION_STRATEGIES).default('rank').meta(cli('selection', 'parent selection')),
    tournament_size: count(2, 3).meta(cli('selection', 'tournament: entrants per tournament')),
    tournament_p: fraction(0.8).meta(cli('selection', 'tournament: probability that the best entrant wins, in (0, 1]')),
    top_k_ratio: fraction(0.3).meta(cli('selection', 'top_k: share of the population eligible, in (0, 1]')),
    /** top_k: weight of content diversity against quality when picking parents. */
    diversity_weight: unit(0.3).meta(cli('selection', 'top_k: weight of content diversity against quality, in [0, 1]')),

    adaptive_mutation: z
      .enum(ADAPTIVE_MUTATIONS)
      .default('fixed')
      .meta(cli('mutation', 'how mutation modes are scheduled')),
    mutation_window_size: count(1, 10).meta(cli('mutation', 'success_feedback: generations of history per mode')),
    min_mutation_weight: fraction(0.1).meta(cli('mutation', "floor of any mode's weight, in (0, 1]")),
    exploration_phase_ratio: fraction(0.3).meta(
      cli('mutation', 'exploration_decay: share of generations that explore, in (0, 1]'),
    ),
    diversity_threshold: unit(0.05).meta(
      cli('mutation', 'diversity_driven: population diversity below which exploratory modes win, in [0, 1]'),
    ),

    /** prompt_local: finish a prompt once its best rubric is "distinguished" (see `distinguish_min_tail_acc`). */
    stop_when_distinguished: z
      .boolean()
      .default(true)
      .meta(cli('stopping', 'prompt_local: finish a prompt once its best rubric is distinguished')),
    /** The ground-truth best must beat the runner-up by more than this; null = `tie_tolerance`. */
    distinguish_margin: z
      .number()
      .min(0)
      .nullable()
      .default(null)
      .meta(cli('stopping', 'margin the true best must beat the runner-up by ("auto" = --tie-tolerance)')),
    /** …and the raw tail accuracy must reach this (new: autosr only required top-2 separation, §8.4). */
    distinguish_min_tail_acc: unit(0.8).meta(
      cli('stopping', 'raw tail accuracy a distinguished rubric needs, in [0, 1]'),
    ),

    // Objective (autosr §2.2).
    tail_fraction: fraction(0.25).meta(cli('objective', 'share of candidates in the top tail, in (0, 1]')),
    lambda_var: z.number().min(0).default(0.2).meta(cli('objective', 'penalty weight of the score variance')),
    mu_diverse: z.number().min(0).default(0.25).meta(cli('objective', 'bonus weight of diverse-source pairs')),
    pair_confidence_prior: z
      .number()
      .min(0)
      .default(8)
      .meta(cli('objective', 'pseudo-count that shrinks tail accuracy towards 0.5')),
    tie_tolerance: z.number().min(0).default(1e-8).meta(cli('objective', 'scores closer than this tie')),
    /** The tail grows until it holds at least this many pairs, when the prompt has enough candidates (new, §8.3). */
    min_tail_pairs: count(1, 3).meta(cli('objective', 'the tail grows until it holds at least this many pairs')),
    /** Judge-pair budgets of the successive-halving stages; 0 = every tail pair. */
    pair_budget_small: count(0, 8).meta(
      cli('objective', 'successive halving: judge pairs of the first stage (0 = every tail pair)'),
    ),
    pair_budget_medium: count(0, 24).meta(
      cli('objective', 'successive halving: judge pairs of the second stage (0 = every tail pair)'),
    ),
    pair_budget_full: count(0, 0).meta(cli('objective', 'judge pairs at full fidelity (0 = every tail pair)')),

    /** Votes per candidate; null = the rubric's `grading_protocol.num_votes`. */
    num_votes: z
      .number()
      .int()
      .min(1)
      .max(15)
      .nullable()
      .default(null)
      .meta(cli('objective', 'verifier votes per candidate ("auto" = each rubric\'s own num_votes)')),

    /** Most role calls (verifier, judge, proposer, initializer) in flight at once. Does not change results. */
    concurrency: z
      .number()
      .int()
      .min(1)
      .max(256)
      .default(8)
      .meta(cli('scheduling', 'most role calls in flight at once (does not change results)')),
    /** prompt_local and iterative: most prompts searched at once. Does not change results. */
    prompt_concurrency: z
      .number()
      .int()
      .min(1)
      .max(256)
      .default(4)
      .meta(cli('scheduling', 'prompt_local/iterative: most prompts searched at once (does not change results)')),
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
 * @example configHash(parseSearchConfig({ seed: 7 })) === configHash(parseSearchConfig({ seed: 7, concurrency: 32 }))
 *   // true
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
