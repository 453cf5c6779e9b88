import { judgeGroup } from '../../src/agents/group-scorer/index.ts'
import type { Judgement } from '../../src/agents/scorer/index.ts'
import { groupBy } from '../../src/collections/index.ts'
import { derivedSeed, hashHex } from '../../src/hash/index.ts'
import type { ScoreRequest } from '../../src/schemas/rollout.ts'
import type { RunConfig } from '../../src/schemas/run-config.ts'
import type { RubricSnapshot } from '../../src/schemas/rubric.ts'
import { judgementCache } from './caches.ts'
import type { RoleModel } from './models.ts'

/** What a request that asks for relative judging learns of it: the seed, the calls, and any fallback. */
export interface RelativeScoring {
  /** Seeds the order the judge sees each group in (derived per group from this and the prompt). */
  seed: number
  /** Filled in while scoring. */
  report: { groups: number; calls: number; cached: number; fallbacks: { responses: number; reason: string }[] }
}

/** One distinct response waiting for a judgement. */
export interface RelativeUnit {
  instanceId: string
  snapshot: RubricSnapshot
  request: ScoreRequest
  /** The response's pointwise judgement key (its content, the model, the scale, the prompts). */
  key: string
  /**
   * LLM calls this request has spent judging the response: its group's call adds its attempts, which together stay
   * within the run's `budgets.judge_calls_per_rollout`.
   */
  calls: number
}

/**
 * Judges responses to the same prompt (and instance, rubric version and reference) together, one call per group of
 * at most `relative_group_max_chars` of responses; a group of one is left to pointwise judging, and so is every
 * response of a group whose call failed or whose reply was malformed (noted in the report). Judgements are cached per
 * (group content, rubric version). A group's attempts are charged to each of its responses (`calls`), within what is
 * left of their `budgets.judge_calls_per_rollout`.
 * @example const judged = await judgeRelatively(scorer, run, units, relative)
 */
export async function judgeRelatively(
  scorer: RoleModel,
  run: { id: string; config: RunConfig },
  units: readonly RelativeUnit[],
  relative: RelativeScoring,
): Promise<Map<RelativeUnit, { judgement: Judgement; cached: boolean }>> {
  const judged = new Map<RelativeUnit, { judgement: Judgement; cached: boolean }>()
  // A trajectory is judged pointwise, where each of its turns is shown under its speaker; the listwise prompt shows an
  // answer as one text.
  const listwise = units.filter((unit) => !unit.request.rollout.messages)
  const byPrompt = groupBy(listwise, (unit) =>
    [unit.instanceId, unit.snapshot.version, unit.request.rollout.input, unit.request.rollout.supplemental_context]
      .map(String)
      .join('\u0000'),
  )
  const groups = [...byPrompt.values()].flatMap((same) => chunksWithin(same, run.config.relative_group_max_chars))
  await Promise.all(
    groups
      .filter((group) => group.length > 1)
      .map(async (group) => {
        relative.report.groups++
        const digest = await hashHex(group.map((unit) => unit.key).join('\u0000'))
        const keyOf = (unit: RelativeUnit) => `${unit.key}|group:${digest}`
        const first = group[0]!
        const cached = group.map((unit) =>
          judgementCache.get(run.id, unit.instanceId, unit.snapshot.version, keyOf(unit)),
        )
        if (cached.every((judgement) => judgement !== undefined)) {
          relative.report.cached++
          for (const [index, unit] of group.entries()) judged.set(unit, { judgement: cached[index]!, cached: true })
          return
        }
        const spent = Math.max(...group.map((unit) => unit.calls))
        const left = run.config.budgets.judge_calls_per_rollout - spent
        if (left <= 0) {
          relative.report.fallbacks.push({ responses: group.length, reason: 'budgets.judge_calls_per_rollout spent' })
          return
        }
        let attempts = 1
        try {
          relative.report.calls++
          const judgements = await judgeGroup(
            scorer.model,
            {
              rubrics: first.snapshot.rubrics,
              rollouts: group.map((unit) => unit.request.rollout),
              metadata: first.request.metadata,
              gradeMax: run.config.grade_max,
              locale: run.config.locale,
              prompts: run.config.prompts,
              seed: derivedSeed(relative.seed, first.request.rollout.input),
            },
            {
              maxAttempts: Math.min(scorer.settings.max_attempts, left),
              maxDelayMs: Math.min(8_000, scorer.settings.timeout_ms),
              onRetry: () => void attempts++,
            },
          )
          for (const [index, unit] of group.entries()) {
            judgementCache.set(run.id, unit.instanceId, unit.snapshot.version, keyOf(unit), judgements[index]!)
            judged.set(unit, { judgement: judgements[index]!, cached: false })
          }
        } catch (error) {
          relative.report.fallbacks.push({ responses: group.length, reason: String((error as Error).message ?? error) })
        } finally {
          for (const unit of group) unit.calls = spent + attempts
        }
      }),
  )
  return judged
}

/** Consecutive runs of units whose outputs together stay within `maxChars` (a unit longer than that stands alone). */
function chunksWithin(units: readonly RelativeUnit[], maxChars: number): RelativeUnit[][] {
  const chunks: RelativeUnit[][] = []
  let size = 0
  for (const unit of units) {
    const length = unit.request.rollout.output.length
    if (chunks.length === 0 || size + length > maxChars) {
      chunks.push([])
      size = 0
    }
    chunks.at(-1)!.push(unit)
    size += length
  }
  return chunks
}
