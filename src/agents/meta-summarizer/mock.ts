/** The meta-summarizer's offline mock reply: the chunk summaries of one step, consolidated by counts. */
import type { MockReply } from '../../llm/types.ts'
import type { BatchSummary, BatchSummaryReply } from '../../schemas/agents.ts'
import { byFrequency, unique } from '../mock-heuristics/words.ts'
import { memoryEntry, planFor } from '../summarizer/mock.ts'

/**
 * The meta-summarizer's reply on the mock backend, in the JSON the meta-summarizer prompt asks for.
 * @example const request = { ...metaRequest, mock: mockMetaSummarizerReply(summaries, 3) }
 */
export function mockMetaSummarizerReply(summaries: BatchSummary[], step: number): MockReply {
  return () => JSON.stringify(consolidateHeuristically(summaries, step))
}

/**
 * The meta-summarizer mock's consolidation of chunk summaries, as an object.
 * @example consolidateHeuristically(summaries, 3).reward_hacking.count // the chunks' counts added
 * @internal
 */
export function consolidateHeuristically(summaries: BatchSummary[], step: number): BatchSummaryReply {
  const total = summaries.reduce((sum, summary) => sum + summary.stats.rollouts, 0)
  const mean = total
    ? summaries.reduce((sum, summary) => sum + summary.stats.mean_score * summary.stats.rollouts, 0) / total
    : 0
  const count = summaries.reduce((sum, summary) => sum + summary.reward_hacking.count, 0)
  const tactics = byFrequency(summaries.flatMap((summary) => summary.reward_hacking.tactics)).map(([tactic]) => tactic)
  const examples = unique(summaries.flatMap((summary) => summary.reward_hacking.examples)).slice(0, 10)
  const patterns = unique(
    summaries.flatMap((summary) =>
      summary.systemic_patterns.filter((pattern) => !/^mean score|attempted reward hacking/.test(pattern)),
    ),
  )
  const plan = planFor(count, tactics, mean)
  return {
    executive_summary:
      `Step ${step}: ${total} rollouts in ${summaries.length} chunks, mean score ${mean.toFixed(2)}. ` +
      (count ? `${count} attempted reward hacking (${tactics.join(', ')}).` : 'No reward hacking was seen.'),
    systemic_patterns: [
      ...(count ? [`${count} of ${total} rollouts attempted reward hacking (${tactics.join(', ')})`] : []),
      ...patterns.slice(0, 10),
      `mean score ${mean.toFixed(2)} over ${summaries.length} chunks`,
    ],
    reward_hacking: { count, tactics, examples },
    rubric_meta_evaluation: unique(summaries.map((summary) => summary.rubric_meta_evaluation))
      .join(' ')
      .slice(0, 2_000),
    evolution_plan: plan,
    memory_entry: memoryEntry(step, total, mean, count, tactics, plan),
  }
}
