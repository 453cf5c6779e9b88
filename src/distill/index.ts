/**
 * Distillation of judged rollouts into classifier-RM training data: per rollout the mean and spread of its repeated
 * judgements, preference pairs within a prompt only where the gap clears the judge's own noise, a per-prompt cap,
 * a train / held-out split by prompt, and the rows each trainer reads as it is.
 *
 * The noise bound: for rollouts a (chosen) and b (rejected) with n_a, n_b judgements of sample variance var_a, var_b,
 * a pair is kept only when  mean_a − mean_b ≥ min_margin  and  mean_a − mean_b > z · √(var_a/n_a + var_b/n_b)
 * (a one-sided test that a's expected score is above b's at level z). With one judgement per rollout the variance is
 * unknown (0 here), so only the margin protects the pair: repeat at least twice to denoise.
 */
import { groupBy } from '../collections/index.ts'
import { fnv1a, mix32 } from '../hash/index.ts'
import { mean, sampleStd } from '../stats/index.ts'
import type { DISTILL_FORMATS } from '../schemas/distill-formats.ts'
import type { TrajectoryMessage } from '../schemas/trajectory.ts'
import { DROP_REASONS } from '../schemas/distill-summary.ts'

/** One distinct response to one prompt, with every judgement it got (failed judgements left out). */
export interface JudgedResponse {
  prompt: string
  response: string
  /** The task turns and the turns after them, when the rollout was a trajectory: conversational rows keep them. */
  messages?: { task: TrajectoryMessage[]; completion: TrajectoryMessage[] }
  /** The archived rollouts that gave this exact text (identical responses merge into one). */
  rollout_ids: string[]
  /** The repeated judgements, in repeat order (one per judge × repeat that succeeded). */
  samples: number[]
  /** The score the run gave it online (the first rollout's, when several merged). */
  online_score: number
}

/**
 * The mean, spread (sample standard deviation, 0 below two samples) and count of a rollout's judgements.
 * @internal
 */
export interface SampleStats {
  mean: number
  spread: number
  n: number
}

export interface PairingOptions {
  /** The z of the noise bound (1.96 ≈ 97.5 % one-sided). */
  z: number
  /** The smallest gap between the means that makes a pair, whatever the noise. */
  minMargin: number
  /** Most pairs kept per prompt (best vs worst first, then the closest neighbours that still clear the bound). */
  pairsPerPrompt: number
}

type DropReason = (typeof DROP_REASONS)[number]

/** A kept pair: chosen and rejected responses of one prompt, with their statistics and the bound they cleared. */
export interface PreferencePair {
  prompt: string
  chosen: string
  rejected: string
  /** The trajectories' turns, when the responses were trajectories (see `JudgedResponse.messages`). */
  messages?: { task: TrajectoryMessage[]; chosen: TrajectoryMessage[]; rejected: TrajectoryMessage[] }
  chosen_stats: SampleStats
  rejected_stats: SampleStats
  /** mean_chosen − mean_rejected. */
  gap: number
  /** z · √(var_c/n_c + var_r/n_r). */
  bound: number
}

/** What pairing a set of prompts gave. */
export interface Pairing {
  pairs: PreferencePair[]
  /** Candidate pairs considered: kept + every dropped count. */
  candidates: number
  dropped: Record<DropReason, number>
}

/**
 * Mean, sample standard deviation and count.
 * @example sampleStats([0.6, 0.8]) // { mean: 0.7, spread: 0.1414…, n: 2 }
 * @internal
 */
export function sampleStats(samples: readonly number[]): SampleStats {
  return { mean: mean(samples) ?? 0, spread: sampleStd(samples) ?? 0, n: samples.length }
}

/**
 * The noise bound a gap between two rollouts' means must exceed: z · √(var_a/n_a + var_b/n_b).
 * @example noiseBound({ mean: 0.8, spread: 0.1, n: 3 }, { mean: 0.5, spread: 0.1, n: 3 }, 1.96) // 0.16
 * @internal
 */
export function noiseBound(a: SampleStats, b: SampleStats, z: number): number {
  const term = (stats: SampleStats) => (stats.n === 0 ? 0 : stats.spread ** 2 / stats.n)
  return z * Math.sqrt(term(a) + term(b))
}

/**
 * Preference pairs of every prompt: per prompt the responses ordered by mean, candidates best vs worst and then each
 * adjacent pair (hard negatives, closest gap first); a candidate is kept when it clears the margin and the noise
 * bound, until `pairsPerPrompt`. Responses with no judgement take no part.
 * @example const { pairs, dropped } = pairResponses(responses, { z: 1.96, minMargin: 0.05, pairsPerPrompt: 4 })
 */
export function pairResponses(responses: readonly JudgedResponse[], options: PairingOptions): Pairing {
  const dropped = Object.fromEntries(DROP_REASONS.map((reason) => [reason, 0])) as Record<DropReason, number>
  const pairs: PreferencePair[] = []
  let candidates = 0
  for (const group of groupBy(
    responses.filter((response) => response.samples.length > 0),
    (response) => response.prompt,
  ).values()) {
    const ranked = group
      .map((response) => ({ response, stats: sampleStats(response.samples) }))
      .sort((a, b) => b.stats.mean - a.stats.mean)
    if (ranked.length < 2) continue
    const indexPairs: Array<[number, number]> = [[0, ranked.length - 1]]
    const adjacent = ranked
      .slice(0, -1)
      .map((_, i) => [i, i + 1] as [number, number])
      .filter(([i, j]) => !(i === 0 && j === ranked.length - 1))
    adjacent.sort(
      ([a1, a2], [b1, b2]) =>
        ranked[a1]!.stats.mean - ranked[a2]!.stats.mean - (ranked[b1]!.stats.mean - ranked[b2]!.stats.mean),
    )
    indexPairs.push(...adjacent)
    let kept = 0
    for (const [i, j] of indexPairs) {
      candidates++
      const chosen = ranked[i]!
      const rejected = ranked[j]!
      const gap = chosen.stats.mean - rejected.stats.mean
      const bound = noiseBound(chosen.stats, rejected.stats, options.z)
      const reason: DropReason | undefined =
        gap <= 0
          ? 'tie'
          : gap < options.minMargin
            ? 'below_margin'
            : gap <= bound
              ? 'within_noise'
              : kept >= options.pairsPerPrompt
                ? 'over_prompt_cap'
                : undefined
      if (reason) {
        dropped[reason]++
        continue
      }
      kept++
      pairs.push({
        prompt: chosen.response.prompt,
        chosen: chosen.response.response,
        rejected: rejected.response.response,
        ...(chosen.response.messages && rejected.response.messages
          ? {
              messages: {
                task: chosen.response.messages.task,
                chosen: chosen.response.messages.completion,
                rejected: rejected.response.messages.completion,
              },
            }
          : {}),
        chosen_stats: chosen.stats,
        rejected_stats: rejected.stats,
        gap,
        bound,
      })
    }
  }
  return { pairs, candidates, dropped }
}

/**
 * The prompts held out: a share of them (at least one, and never all, when there are two or more), chosen by a
 * seeded hash of the prompt so the split is the same on every run and independent of the input's order.
 * @example heldOutPrompts(['a', 'b', 'c', 'd'], 0.25, 7) // Set { one of them }
 */
export function heldOutPrompts(prompts: Iterable<string>, share: number, seed: number): Set<string> {
  const distinct = [...new Set(prompts)]
  if (distinct.length < 2 || share <= 0) return new Set()
  const count = Math.min(distinct.length - 1, Math.max(1, Math.round(distinct.length * share)))
  const ranked = distinct
    .map((prompt) => ({ prompt, rank: mix32(fnv1a(`${seed}\u241f${prompt}`)) }))
    .sort((a, b) => a.rank - b.rank || (a.prompt < b.prompt ? -1 : 1))
  return new Set(ranked.slice(0, count).map((entry) => entry.prompt))
}

/** How agreeing the repeated judgements were. */
export interface RepeatAgreement {
  /** Mean spread over the responses judged at least twice (null when none was). */
  mean_spread: number | null
  /**
   * Over every two responses of a prompt with different means, the share of repeats that order them as their
   * means do (a tie in a repeat counts half); null below two samples per response.
   */
  pairwise: number | null
  /** Over the kept pairs, the share the online scores order the same way (a tie counts half). */
  online: number | null
}

/**
 * Agreement between repeats, and of the online scores with the kept pairs.
 * @example repeatAgreement(responses, pairs).pairwise // 0.93
 */
export function repeatAgreement(
  responses: readonly JudgedResponse[],
  pairs: readonly PreferencePair[],
): RepeatAgreement {
  const repeated = responses.filter((response) => response.samples.length >= 2)
  const spreads = repeated.map((response) => sampleStats(response.samples).spread)
  let agree = 0
  let compared = 0
  for (const group of groupBy(repeated, (response) => response.prompt).values()) {
    for (let i = 0; i < group.length; i++) {
      for (let j = i + 1; j < group.length; j++) {
        const [a, b] = [group[i]!, group[j]!]
        const direction = Math.sign(sampleStats(a.samples).mean - sampleStats(b.samples).mean)
        if (direction === 0) continue
        const repeats = Math.min(a.samples.length, b.samples.length)
        for (let r = 0; r < repeats; r++) {
          const sign = Math.sign(a.samples[r]! - b.samples[r]!)
          agree += sign === direction ? 1 : sign === 0 ? 0.5 : 0
          compared++
        }
      }
    }
  }
  const online = new Map(
    responses.map((response) => [`${response.prompt}\u0000${response.response}`, response.online_score]),
  )
  const onlineVotes = pairs.map((pair) => {
    const sign = Math.sign(
      online.get(`${pair.prompt}\u0000${pair.chosen}`)! - online.get(`${pair.prompt}\u0000${pair.rejected}`)!,
    )
    return sign > 0 ? 1 : sign === 0 ? 0.5 : 0
  })
  return { mean_spread: mean(spreads), pairwise: compared === 0 ? null : agree / compared, online: mean(onlineVotes) }
}

export type DistillFormat = (typeof DISTILL_FORMATS)[number]

type Message = { role: 'user' | 'assistant'; content: string }
/** A row's prompt or response: text, or chat turns. */
type Turns = string | Message[] | TrajectoryMessage[]

/**
 * A TRL `RewardTrainer` row (explicit prompt): plain strings, or the conversational form whose chat template the
 * trainer applies itself.
 * @example trlRow(pair, false) // { prompt: 'What is 2+2?', chosen: '4', rejected: '5' }
 */
export function trlRow(
  pair: PreferencePair,
  conversational: boolean,
): { prompt: Turns; chosen: Turns; rejected: Turns } {
  if (!conversational) return { prompt: pair.prompt, chosen: pair.chosen, rejected: pair.rejected }
  // Trajectories keep their turns, tool calls and results included: the trainer's chat template renders them.
  if (pair.messages)
    return { prompt: pair.messages.task, chosen: pair.messages.chosen, rejected: pair.messages.rejected }
  return {
    prompt: [{ role: 'user', content: pair.prompt }],
    chosen: [{ role: 'assistant', content: pair.chosen }],
    rejected: [{ role: 'assistant', content: pair.rejected }],
  }
}

/**
 * An OpenRLHF reward-model row (`--prompt_key prompt --chosen_key chosen --rejected_key rejected`, conversational
 * with `--apply_chat_template`); `margin` feeds its margin loss.
 * @example openRlhfRow(pair, false) // { prompt: 'What is 2+2?', chosen: '4', rejected: '5', margin: 0.4 }
 */
export function openRlhfRow(
  pair: PreferencePair,
  conversational: boolean,
): ReturnType<typeof trlRow> & { margin: number } {
  return { ...trlRow(pair, conversational), margin: round(pair.gap) }
}

/**
 * A pointwise row for a regression head: the response's mean judgement, its spread and how many judgements.
 * @example pointwiseRow(response) // { prompt: 'What is 2+2?', response: '4', score: 0.9, spread: 0.05, n: 3 }
 */
export function pointwiseRow(response: JudgedResponse): {
  prompt: string
  response: string
  score: number
  spread: number
  n: number
} {
  const stats = sampleStats(response.samples)
  return {
    prompt: response.prompt,
    response: response.response,
    score: round(stats.mean),
    spread: round(stats.spread),
    n: stats.n,
  }
}

const round = (value: number) => Math.round(value * 1e6) / 1e6
