/** The query generator's offline mock reply: one memory query per hacking tactic and per recurring pattern, capped. */
import type { MockReply } from '../../llm/types.ts'
import type { BatchSummary, QueryList } from '../../schemas/agents.ts'
import { unique } from '../mock-heuristics/words.ts'

/**
 * The query generator's reply on the mock backend, in the JSON the query-generator prompt asks for.
 * @example const request = { ...queryRequest, mock: mockQueryGeneratorReply(summary, 4) }
 */
export function mockQueryGeneratorReply(summary: BatchSummary, maxQueries: number): MockReply {
  return () => JSON.stringify(queriesHeuristically(summary, maxQueries))
}

/**
 * The query generator mock's queries, as an object: at least one, at most `maxQueries`.
 * @example queriesHeuristically(summary, 2).queries.length // ≤ 2
 * @internal
 */
export function queriesHeuristically(summary: BatchSummary, maxQueries: number): QueryList {
  const queries: string[] = []
  for (const tactic of summary.reward_hacking.tactics)
    queries.push(`earlier reward hacking by "${tactic}" and the rubric that stopped it`)
  const problems = summary.systemic_patterns.filter(
    (pattern) => !/^(?:mean score|matches the reference|no reference)|attempted reward hacking/.test(pattern),
  )
  for (const pattern of problems.slice(0, 2))
    queries.push(`earlier steps with ${pattern.split(':')[0]!.trim()} answers and how the rubrics changed`)
  if (summary.reward_hacking.count === 0 && summary.stats.mean_score >= 0.8)
    queries.push('past advancement updates when scores were high and clean')
  if (queries.length === 0) queries.push('recent rubric updates and how scores moved after them')
  return { queries: unique(queries).slice(0, Math.max(1, maxQueries)) }
}
