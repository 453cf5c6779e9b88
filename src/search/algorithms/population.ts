/**
 * The evolutionary machinery shared by both iteration scopes: the initial population, one round of evolution of
 * a prompt's population (plan sequentially, then run concurrently), the "distinguished" test and prompt hardness.
 *
 * A round: parents are the current best plus `mutation_parent_count` selected rubrics; each of
 * `mutations_per_round` children mutates parent i mod |parents| in a scheduled mode, contrasting the top two
 * candidates under that parent. New children go through successive halving (cheap stages first: fewer votes,
 * smaller judge-pair budgets; a stage keeps its best share plus every child that beats the population's worst at
 * the same fidelity). Every surviving child better than the worst member is admitted; the update keeps the
 * elites, then the admitted children, then the rest by score, deduplicated by content. Each child credits its
 * own mode with its own improvement over its parent, measured at the fidelity it reached.
 */
import { rubricKey } from '../evaluator.ts'
import type { ObjectiveResult } from '../objective.ts'
import { derivedSeed, type Rng } from '../../hash/index.ts'
import { MUTATION_MODES, type MutationMode, type PromptItem } from '../types.ts'
import type { SearchRubric } from '../../schemas/search-rubric.ts'
import {
  fullFidelity,
  proposeRubric,
  scoreRubric,
  throwIfAborted,
  topTwo,
  type Fidelity,
  type ScoredRubric,
  type SearchContext,
} from './context.ts'
import type { MutationScheduler } from './mutation-schedule.ts'
import { selectParents, uniqueByKey } from './selection.ts'

/**
 * The initial population of a prompt: the base rubric plus up to population_size − 1 distinct mutations of it,
 * each contrasting the top two candidates under the BASE rubric (autosr used candidates[0]/[1] of the dataset).
 * Modes cycle through every mutation mode; at most 3 × population_size proposals are tried in total.
 * @example const rubrics = await initialPopulation(ctx, item, await scoreRubric(ctx, item, base))
 */
export async function initialPopulation(
  ctx: SearchContext,
  item: PromptItem,
  base: ScoredRubric,
): Promise<SearchRubric[]> {
  const { population_size: size, seed } = ctx.config
  const [top, runnerUp] = topTwo(item, base)
  const population: SearchRubric[] = [base.rubric]
  const keys = new Set([base.key])
  const maxAttempts = size * 3
  let attempt = 0
  while (population.length < size && attempt < maxAttempts) {
    throwIfAborted(ctx)
    const wanted = Math.min(size - population.length, maxAttempts - attempt)
    const attempts = Array.from({ length: wanted }, (_, i) => attempt + i)
    attempt += wanted
    const children = await Promise.all(
      attempts.map((n) =>
        proposeRubric(ctx, {
          item,
          rubric: base.rubric,
          mode: MUTATION_MODES[n % MUTATION_MODES.length]!,
          top,
          runnerUp,
          seed: derivedSeed(seed, 'init', item.prompt_id, n),
        }),
      ),
    )
    for (const child of children) {
      if (!child) continue
      const key = rubricKey(child)
      if (keys.has(key) || population.length >= size) continue
      keys.add(key)
      population.push(child)
    }
  }
  return population
}

/** One round of evolution for one prompt, decided before any call is made (so PRNG draws stay in order). */
export interface EvolutionPlan {
  item: PromptItem
  generation: number
  /** The population, scored and sorted best first. */
  population: ScoredRubric[]
  /** Parent of child i: `parents[i % parents.length]`. */
  parents: ScoredRubric[]
  modes: MutationMode[]
}

/**
 * Picks the parents (selection strategy) and the mode of every child (scheduler), drawing from `rng` in order.
 * @example const plan = planEvolution(ctx, item, population, scheduler, rng, generation, diversity)
 */
export function planEvolution(
  ctx: SearchContext,
  item: PromptItem,
  population: ScoredRubric[],
  scheduler: MutationScheduler,
  rng: Rng,
  generation: number,
  diversity: number | null,
): EvolutionPlan {
  const { config } = ctx
  const selected = selectParents(population, {
    ...config,
    strategy: config.selection_strategy,
    count: Math.min(population.length, config.mutation_parent_count),
    rng,
  })
  const parents = uniqueByKey([population[0]!, ...selected])
  const drawn = Array.from({ length: config.mutations_per_round }, () => scheduler.select(rng, diversity))
  return { item, generation, population, parents, modes: distinctPerParent(drawn, parents.length) }
}

/**
 * The drawn modes with no parent given the same mode twice while a mode it has not been given is left: two children
 * of one parent in one mode are the same proposal request, and a judge at temperature 0 writes the same child twice.
 * A repeat takes the next mode in `MUTATION_MODES` order that its parent has not had this round.
 * @example distinctPerParent(['decompose', 'decompose'], 1) // ['decompose', 'factual_focus']
 * @internal
 */
export function distinctPerParent(modes: readonly MutationMode[], parentCount: number): MutationMode[] {
  const given = Array.from({ length: parentCount }, () => new Set<MutationMode>())
  return modes.map((mode, index) => {
    const had = given[index % parentCount]!
    const start = MUTATION_MODES.indexOf(mode)
    const free = MUTATION_MODES.map((_, step) => MUTATION_MODES[(start + step) % MUTATION_MODES.length]!).find(
      (candidate) => !had.has(candidate),
    )
    const chosen = free ?? mode
    had.add(chosen)
    return chosen
  })
}

/** What a round produced. */
export interface EvolutionOutcome {
  /** The next population, scored at full fidelity, best first. */
  population: ScoredRubric[]
  /** Per child, in child order: its mode and its improvement over its parent. */
  credits: Array<{ mode: MutationMode; improvement: number }>
  children: number
  /** Children that were new content (not a copy of a member or of an earlier child). */
  novel_children: number
  admitted: number
}

interface ChildRecord {
  index: number
  parent: ScoredRubric
  rubric: SearchRubric
  key: string
  /** The score at the last stage reached, and the parent's at the same fidelity. */
  stage: ScoredRubric | null
  parentAtStage: ScoredRubric | null
}

/**
 * The fidelity of each successive-halving stage: 1 vote and the small pair budget, then half the votes and the
 * medium budget, then full. Fewer votes are a genuine saving (the verifier dominates the cost) and votes are
 * memoised, so a survivor's stage-one vote is reused at full fidelity.
 * @example halvingStages(ctx, rubric) // [{ votes: 1, budget: 8 }, { votes: 2, budget: 24 }, { votes: 3, budget: 0 }]
 */
function halvingStages(ctx: SearchContext, rubric: SearchRubric): Fidelity[] {
  const full = fullFidelity(ctx, rubric)
  return [
    { votes: 1, budget: ctx.config.pair_budget_small },
    { votes: Math.max(1, Math.ceil(full.votes / 2)), budget: ctx.config.pair_budget_medium },
    full,
  ]
}

/**
 * Runs a planned round: proposes the children concurrently, halves, updates the population.
 * @example const outcome = await executeEvolution(ctx, plan); population = outcome.population
 */
export async function executeEvolution(ctx: SearchContext, plan: EvolutionPlan): Promise<EvolutionOutcome> {
  const { config } = ctx
  const { item, population, modes } = plan
  const tolerance = config.tie_tolerance

  const children = await proposeChildren(ctx, plan)
  throwIfAborted(ctx)

  const members = new Map(population.map((member) => [member.key, member]))
  const novel: ChildRecord[] = []
  const firstOfKey = new Map<string, ChildRecord>()
  for (const child of children) {
    if (members.has(child.key) || firstOfKey.has(child.key)) continue
    firstOfKey.set(child.key, child)
    novel.push(child)
  }

  const worst = population[population.length - 1]!
  const alive = await successiveHalving(ctx, item, novel, worst)

  // Population update: elites, then admitted children, then the rest; deduplicated; truncated.
  const finalists = alive.filter((child) => child.stage !== null).map((child) => child.stage!)
  const admitted = finalists.filter((child) => child.total > worst.total + tolerance).sort((a, b) => b.total - a.total)
  const next = uniqueByKey([
    ...population.slice(0, config.elitism_count),
    ...admitted,
    ...population.slice(config.elitism_count),
  ]).slice(0, config.population_size)
  const sorted = next
    .map((entry, position) => ({ entry, position }))
    .sort((a, b) => b.entry.total - a.entry.total || a.position - b.position)
    .map(({ entry }) => entry)

  const credits = children.map((child) => {
    const source = members.get(child.key) ?? firstOfKey.get(child.key)!
    if ('total' in source) return { mode: modes[child.index]!, improvement: source.total - child.parent.total }
    return { mode: modes[child.index]!, improvement: source.stage!.total - source.parentAtStage!.total }
  })
  return {
    population: sorted,
    credits,
    children: children.length,
    novel_children: novel.length,
    admitted: admitted.filter((child) => next.includes(child)).length,
  }
}

/**
 * Proposes one child per planned mode, concurrently, each from its parent (parents taken in turn); a mode whose
 * proposal was dropped has no child.
 */
async function proposeChildren(ctx: SearchContext, plan: EvolutionPlan): Promise<ChildRecord[]> {
  const { item, parents, modes, generation } = plan
  const children = await Promise.all(
    modes.map(async (mode, index) => {
      const parent = parents[index % parents.length]!
      const [top, runnerUp] = topTwo(item, parent)
      const rubric = await proposeRubric(ctx, {
        item,
        rubric: parent.rubric,
        mode,
        top,
        runnerUp,
        seed: derivedSeed(ctx.config.seed, 'propose', item.prompt_id, generation, index),
      })
      if (!rubric) return undefined
      return { index, parent, rubric, key: rubricKey(rubric), stage: null, parentAtStage: null }
    }),
  )
  return children.filter((child) => child !== undefined)
}

/**
 * Successive halving over the novel children: each stage scores them (and their parents) at a higher fidelity and
 * keeps the best share plus any that beat the population's worst; the last stage is full fidelity.
 */
async function successiveHalving(
  ctx: SearchContext,
  item: PromptItem,
  novel: ChildRecord[],
  worst: ScoredRubric,
): Promise<ChildRecord[]> {
  const { config } = ctx
  const tolerance = config.tie_tolerance
  let alive = novel
  const stages = novel.length > 0 ? halvingStages(ctx, novel[0]!.rubric) : []
  for (let s = 0; s < stages.length && alive.length > 0; s++) {
    throwIfAborted(ctx)
    const final = s === stages.length - 1
    const fidelityOf = (rubric: SearchRubric) => (final ? fullFidelity(ctx, rubric) : halvingStages(ctx, rubric)[s]!)
    await Promise.all(
      alive.map(async (child) => {
        ;[child.stage, child.parentAtStage] = await Promise.all([
          scoreRubric(ctx, item, child.rubric, fidelityOf(child.rubric)),
          final ? child.parent : scoreRubric(ctx, item, child.parent.rubric, fidelityOf(child.parent.rubric)),
        ])
      }),
    )
    if (final) break
    const worstAtStage = await scoreRubric(ctx, item, worst.rubric, fidelityOf(worst.rubric))
    const keep = Math.max(1, Math.ceil(alive.length * config.survival_fraction))
    const ranked = [...alive].sort((a, b) => b.stage!.total - a.stage!.total || a.index - b.index)
    const survivors = new Set(ranked.slice(0, keep))
    for (const child of ranked) if (child.stage!.total > worstAtStage.total + tolerance) survivors.add(child)
    alive = alive.filter((child) => survivors.has(child))
  }
  return alive
}

/**
 * Whether a prompt is settled (prompt_local stops there): valid judged pairs, the ground-truth best ahead of the
 * runner-up by more than the margin, AND a raw tail accuracy of at least `distinguish_min_tail_acc`.
 * @example isDistinguished(best.objective, config) // false while the tail is misordered
 */
export function isDistinguished(
  objective: ObjectiveResult,
  config: {
    stop_when_distinguished: boolean
    distinguish_margin: number | null
    tie_tolerance: number
    distinguish_min_tail_acc: number
  },
): boolean {
  return (
    config.stop_when_distinguished &&
    objective.valid_pairs > 0 &&
    objective.signed_top_margin > (config.distinguish_margin ?? config.tie_tolerance) &&
    objective.raw_tail_acc >= config.distinguish_min_tail_acc
  )
}

/**
 * How much a prompt needs evolution: 1/(1 + top margin of its best) + 2·(top-1 disagreement across the population)
 * + (1 − raw tail accuracy of its best).
 * @example hardness(population) // higher = evolve first
 */
export function hardness(population: readonly ScoredRubric[]): number {
  const best = population[0]!
  const counts = new Map<string, number>()
  for (const member of population) {
    const top = member.evaluation.candidates[0]!.candidate_id
    counts.set(top, (counts.get(top) ?? 0) + 1)
  }
  const disagreement = 1 - Math.max(...counts.values()) / population.length
  return 1 / (1 + Math.max(0, best.objective.top_margin)) + 2 * disagreement + (1 - best.objective.raw_tail_acc)
}
