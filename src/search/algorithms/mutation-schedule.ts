/**
 * Adaptive mutation schedules (autosr §2.6, with §8.8's defects fixed): which mutation mode the proposer is
 * asked for next.
 * - fixed: cycles through the modes draw by draw (autosr used one mode for a whole generation).
 * - success_feedback: weights each mode by its recent success rate × (1 + its mean positive improvement), where
 *   every child credits ONLY its own mode with ITS OWN improvement over its parent (autosr credited every mode of
 *   a round with the round's best, and rewarded |negative| improvements).
 * - exploration_decay: favours exploratory modes for the first `exploration_phase_ratio` of the generations.
 * - diversity_driven: favours exploratory modes when the population's content diversity is below the threshold.
 * The scheduler holds no PRNG: the caller passes one, so draws happen in a deterministic order.
 */
import type { AdaptiveMutation } from '../config.ts'
import type { Rng } from '../../hash/index.ts'
import { MUTATION_MODES, type MutationMode } from '../types.ts'
import { mean } from '../../stats/index.ts'

/** Modes that explore (change the rubric's structure) vs. modes that sharpen what is there. */
const EXPLORATORY_MODES: readonly MutationMode[] = ['decompose', 'counterexample_trigger', 'weight_perturb']

const HISTORY_LIMIT = 100

export interface ScheduleOptions {
  kind: AdaptiveMutation
  /** Total generations of the search (exploration_decay's clock). */
  generations: number
  mutation_window_size: number
  min_mutation_weight: number
  exploration_phase_ratio: number
  diversity_threshold: number
  tie_tolerance: number
}

/** A scheduler's whole state: plain JSON, for checkpoints. */
export interface SchedulerState {
  kind: AdaptiveMutation
  /** Generations advanced so far. */
  generation: number
  /** Modes handed out so far (the fixed schedule's cursor). */
  draws: number
  /** Per mode, the last outcomes as [improved, improvement], oldest first. */
  history: Record<MutationMode, Array<[boolean, number]>>
}

/** What the output reports about a schedule. */
export interface ScheduleDiagnostics {
  generation: number
  success_rates: Record<MutationMode, number | null>
  avg_improvements: Record<MutationMode, number | null>
  uses: Record<MutationMode, number>
}

const perMode = <T>(value: (mode: MutationMode) => T) =>
  Object.fromEntries(MUTATION_MODES.map((mode) => [mode, value(mode)])) as Record<MutationMode, T>

/**
 * The mode whose cumulative probability first exceeds r ∈ [0, 1) (the last mode as a fallback).
 * @example roulette({ raise_bar: 1, decompose: 0, … }, 0.5) // 'raise_bar'
 * @internal
 */
export function roulette(probabilities: Record<MutationMode, number>, r: number): MutationMode {
  let cumulative = 0
  for (const mode of MUTATION_MODES) {
    cumulative += probabilities[mode]
    if (r < cumulative) return mode
  }
  return MUTATION_MODES[MUTATION_MODES.length - 1]!
}

/**
 * Picks mutation modes and learns from their outcomes; restorable from {@link MutationScheduler.state}.
 * @example
 * const scheduler = new MutationScheduler({ kind: 'success_feedback', generations: 12, mutation_window_size: 10,
 * min_mutation_weight: 0.1, exploration_phase_ratio: 0.3, diversity_threshold: 0.05, tie_tolerance: 1e-8 }) const mode
 * = scheduler.select(rng, diversity) scheduler.record(mode, childTotal - parentTotal)
 * scheduler.advance()
 */
export class MutationScheduler {
  private generation: number
  private draws: number
  private readonly history: Record<MutationMode, Array<[boolean, number]>>

  constructor(
    private readonly options: ScheduleOptions,
    state?: SchedulerState,
  ) {
    if (state && state.kind !== options.kind)
      throw new TypeError(`scheduler state is for "${state.kind}", not "${options.kind}"`)
    this.generation = state?.generation ?? 0
    this.draws = state?.draws ?? 0
    this.history = perMode((mode) =>
      (state?.history[mode] ?? []).map(([improved, amount]) => [improved, amount] as [boolean, number]),
    )
  }

  /**
   * The probability of each mode for the next draw (fixed: 1 for the next mode in the cycle).
   * @example scheduler.probabilities(0.02).decompose // higher than raise_bar under diversity_driven
   */
  probabilities(diversity: number | null): Record<MutationMode, number> {
    const { kind } = this.options
    if (kind === 'fixed') {
      const next = MUTATION_MODES[this.draws % MUTATION_MODES.length]!
      return perMode((mode) => (mode === next ? 1 : 0))
    }
    let weights: Record<MutationMode, number>
    if (kind === 'success_feedback') {
      weights = perMode((mode) => {
        const window = this.history[mode].slice(-this.options.mutation_window_size)
        if (window.length === 0) return 0.5
        const rate = window.filter(([improved]) => improved).length / window.length
        const meanImprovement = mean(window.map(([, amount]) => amount)) ?? 0
        return rate * (1 + Math.max(0, meanImprovement))
      })
    } else if (kind === 'exploration_decay') {
      const exploring = this.generation / (this.options.generations * this.options.exploration_phase_ratio) < 1
      weights = perMode((mode) => (EXPLORATORY_MODES.includes(mode) === exploring ? 2 : 0.5))
    } else {
      const d = diversity ?? 0.5
      const threshold = this.options.diversity_threshold
      const need = threshold > 0 ? Math.max(0, 1 - d / threshold) : d <= 0 ? 1 : 0
      weights = perMode((mode) => (EXPLORATORY_MODES.includes(mode) ? 1 + need : 2 - need))
    }
    return normalise(weights, kind === 'success_feedback' ? this.options.min_mutation_weight : 0)
  }

  /**
   * The next mode; draws one number from `rng` unless the schedule is fixed.
   * @example scheduler.select(rng, populationDiversity(population))
   */
  select(rng: Rng, diversity: number | null): MutationMode {
    const probabilities = this.probabilities(diversity)
    const mode =
      this.options.kind === 'fixed'
        ? MUTATION_MODES[this.draws % MUTATION_MODES.length]!
        : roulette(probabilities, rng.next())
    this.draws++
    return mode
  }

  /**
   * Credits `mode` with the improvement of the child it produced over that child's parent.
   * @example scheduler.record('decompose', 0.04)
   */
  record(mode: MutationMode, improvement: number): void {
    const outcomes = this.history[mode]
    outcomes.push([improvement > this.options.tie_tolerance, improvement])
    if (outcomes.length > HISTORY_LIMIT) outcomes.splice(0, outcomes.length - HISTORY_LIMIT)
  }

  /**
   * Moves the schedule's clock to the next generation.
   * @example scheduler.advance()
   */
  advance(): void {
    this.generation++
  }

  /**
   * The whole state, plain JSON.
   * @example new MutationScheduler(options, scheduler.state()) // an identical scheduler
   */
  state(): SchedulerState {
    return {
      kind: this.options.kind,
      generation: this.generation,
      draws: this.draws,
      history: perMode((mode) =>
        this.history[mode].map(([improved, amount]) => [improved, amount] as [boolean, number]),
      ),
    }
  }

  /**
   * Success rates and mean improvements per mode over the window (null for an unused mode), and use counts.
   * @example scheduler.diagnostics().success_rates.anti_fluff
   */
  diagnostics(): ScheduleDiagnostics {
    const window = (mode: MutationMode) => this.history[mode].slice(-this.options.mutation_window_size)
    return {
      generation: this.generation,
      success_rates: perMode((mode) => {
        const outcomes = window(mode)
        return outcomes.length ? outcomes.filter(([improved]) => improved).length / outcomes.length : null
      }),
      avg_improvements: perMode((mode) => {
        return mean(window(mode).map(([, amount]) => amount))
      }),
      uses: perMode((mode) => this.history[mode].length),
    }
  }
}

function normalise(weights: Record<MutationMode, number>, floor: number): Record<MutationMode, number> {
  const sum = MUTATION_MODES.reduce((total, mode) => total + weights[mode], 0)
  let probabilities = perMode((mode) => (sum > 0 ? weights[mode] / sum : 1 / MUTATION_MODES.length))
  if (floor > 0) {
    const clamped = perMode((mode) => Math.max(floor, probabilities[mode]))
    const clampedSum = MUTATION_MODES.reduce((total, mode) => total + clamped[mode], 0)
    probabilities = perMode((mode) => clamped[mode] / clampedSum)
  }
  return probabilities
}
