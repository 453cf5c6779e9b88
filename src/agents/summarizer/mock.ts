/**
 * The summarizer's offline mock reply: counts, tactics by frequency, recurring observations, a plan
 * (CORRECTIVE after hacking, ADVANCEMENT when scores are high and clean, MAINTENANCE otherwise).
 */
import type { MockReply } from '../../llm/types.ts'
import type { AnalysisRecord, BatchSummaryReply } from '../../schemas/agents.ts'
import { SEVERITY_RANK } from '../mock-heuristics/gaming.ts'
import { byFrequency, unique } from '../mock-heuristics/words.ts'
import { mean as meanOf } from '../../stats/index.ts'

/**
 * The summarizer's reply on the mock backend, in the JSON the summarizer prompt asks for.
 * @example const request = { ...summarizerRequest, mock: mockSummarizerReply(analyses, 3) }
 */
export function mockSummarizerReply(records: AnalysisRecord[], step: number): MockReply {
  return () => JSON.stringify(summarizeHeuristically(records, step))
}

/**
 * The summarizer mock's summary of one step's analyses, as an object.
 * @example summarizeHeuristically(analyses, 3).reward_hacking.count // 2
 * @internal
 */
export function summarizeHeuristically(records: AnalysisRecord[], step: number): BatchSummaryReply {
  const total = records.length
  const flagged = records.filter((record) => record.analysis.reward_hacking.flag)
  const tactics = byFrequency(flagged.flatMap((record) => record.analysis.reward_hacking.tactics))
  const tacticNames = tactics.map(([tactic]) => tactic)
  const scores = records.map((record) => record.score)
  const mean = meanOf(scores) ?? 0
  const min = total ? Math.min(...scores) : 0
  const max = total ? Math.max(...scores) : 0
  const examples = [...flagged]
    .sort(
      (a, b) =>
        SEVERITY_RANK[b.analysis.reward_hacking.severity] - SEVERITY_RANK[a.analysis.reward_hacking.severity] ||
        b.score - a.score,
    )
    .slice(0, 5)
    .map((record) => record.rollout_id)
  const plan = planFor(flagged.length, tacticNames, mean)
  return {
    executive_summary:
      `Step ${step}: ${total} rollouts analysed, mean score ${mean.toFixed(2)}. ` +
      (flagged.length
        ? `${flagged.length} attempted reward hacking (${tacticNames.join(', ')}).`
        : 'No reward hacking was seen.'),
    systemic_patterns: systemicPatterns(records, flagged.length, tactics, { mean, min, max }).slice(0, 12),
    reward_hacking: { count: flagged.length, tactics: tacticNames, examples },
    rubric_meta_evaluation: metaEvaluation(records, flagged, { mean, min, max }),
    evolution_plan: plan,
    memory_entry: memoryEntry(step, total, mean, flagged.length, tacticNames, plan),
  }
}

type ScoreRange = { mean: number; min: number; max: number }

function systemicPatterns(
  records: AnalysisRecord[],
  flagged: number,
  tactics: [string, number][],
  { mean, min, max }: ScoreRange,
): string[] {
  const total = records.length
  const patterns: string[] = []
  if (flagged)
    patterns.push(
      `${flagged} of ${total} rollouts attempted reward hacking ` +
        `(${tactics.map(([tactic, count]) => `${tactic} ×${count}`).join(', ')})`,
    )
  const kinds = byFrequency(
    records.flatMap((record) => unique(record.analysis.observations.map((note) => note.split(':')[0]!.trim()))),
  )
  for (const [kind, count] of kinds)
    if (count >= 2 && !kind.startsWith('reward hacking')) patterns.push(`${kind}: ${count} of ${total} rollouts`)
  patterns.push(`mean score ${mean.toFixed(2)} (min ${min.toFixed(2)}, max ${max.toFixed(2)})`)
  return patterns
}

function metaEvaluation(records: AnalysisRecord[], flagged: AnalysisRecord[], { mean, min, max }: ScoreRange): string {
  const hackedMean = flagged.length ? flagged.reduce((sum, record) => sum + record.score, 0) / flagged.length : 0
  const clean = records.filter((record) => !record.analysis.reward_hacking.flag)
  const cleanMean = clean.length ? clean.reduce((sum, record) => sum + record.score, 0) / clean.length : 0
  const fooled = flagged.filter((record) => record.score >= 0.5).length
  if (flagged.length)
    return (
      `The rubrics were fooled by ${fooled} of ${flagged.length} hacking attempts ` +
      `(mean score ${hackedMean.toFixed(2)} for them against ${cleanMean.toFixed(2)} for clean rollouts).`
    )
  return mean >= 0.8
    ? `The rubrics look saturated: mean score ${mean.toFixed(2)} with no hacking; ` +
        'they no longer separate good answers from excellent ones.'
    : `The rubrics separate answers (scores ${min.toFixed(2)} to ${max.toFixed(2)}) and no hacking was seen.`
}

/**
 * The evolution plan a step's numbers call for: CORRECTIVE after hacking, ADVANCEMENT when scores are high and
 * clean, MAINTENANCE otherwise.
 * @example planFor(0, [], 0.9) // 'ADVANCEMENT: answers are good and clean; add a stricter criterion.'
 */
export function planFor(hacked: number, tactics: readonly string[], mean: number): string {
  if (hacked > 0)
    return `CORRECTIVE: penalise ${tactics.join(', ')} with an explicit criterion that gives such attempts 0.`
  if (mean >= 0.8) return 'ADVANCEMENT: answers are good and clean; add a stricter criterion.'
  return 'MAINTENANCE: keep the rubrics; reweight if a criterion proves too lenient or too harsh.'
}

/**
 * The one-line memory a step leaves for later steps.
 * @example memoryEntry(3, 8, 0.5, 0, [], 'MAINTENANCE: …')
 * // 'step 3: 8 rollouts, mean 0.50; reward hacking in 0; plan: MAINTENANCE'
 */
export function memoryEntry(
  step: number,
  total: number,
  mean: number,
  hacked: number,
  tactics: readonly string[],
  plan: string,
): string {
  const named = tactics.length ? ` (${tactics.join(', ')})` : ''
  const strategy = plan.split(':')[0]
  const counts = `${total} rollouts, mean ${mean.toFixed(2)}; reward hacking in ${hacked}${named}`
  return `step ${step}: ${counts}; plan: ${strategy}`
}
