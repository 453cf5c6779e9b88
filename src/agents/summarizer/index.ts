import type { RetryPolicy } from '../../llm/retry.ts'
import type { ChatModel, ChatRequest } from '../../llm/types.ts'
import { renderPrompt, type Locale, type PromptOverrides } from '../../prompts/index.ts'
import { BatchSummaryReply, type AnalysisRecord, type BatchSummary, type ScoreStats } from '../../schemas/agents.ts'
import type { Rubric } from '../../schemas/rubric.ts'
import { dataBoundary, formatScore, parseReplyAs, rubricLines, runAgent } from '../run-agent.ts'
import { batchSummaryReplySchema } from '../reply-schemas.ts'
import { withReplySchema } from '../../llm/response-format.ts'
import { mockSummarizerReply } from './mock.ts'
import { mean } from '../../stats/index.ts'

export interface SummarizerInput {
  /** The run's prompt overrides, keyed `<locale>/<name>` (see RunConfig.prompts). */
  prompts?: PromptOverrides
  /** The analyses of one step (or one chunk of it), each with its rollout id and score. */
  analyses: AnalysisRecord[]
  rubrics: Rubric[]
  step: number
  locale: Locale
}

/**
 * The harness's own numbers about a batch of analyses (count, score range, flagged), never asked of a model.
 * @example scoreStats([{ rollout_id: 'r1', score: 0.5, analysis }]) // { rollouts: 1, mean_score: 0.5, … }
 * @internal
 */
export function scoreStats(analyses: readonly AnalysisRecord[]): ScoreStats {
  if (analyses.length === 0) return { rollouts: 0, mean_score: 0, min_score: 0, max_score: 0, flagged: 0 }
  const scores = analyses.map((record) => record.score)
  return {
    rollouts: analyses.length,
    mean_score: mean(scores) ?? 0,
    min_score: Math.min(...scores),
    max_score: Math.max(...scores),
    flagged: analyses.filter((record) => record.analysis.reward_hacking.flag).length,
  }
}

/**
 * The Summarizer's request for one step of one instance. Instructions, rubrics and the numbers come
 * first; the analyses (which quote rollout text) sit inside data markers, one JSON object per line.
 * @example const request = await buildSummarizerRequest({ analyses, rubrics, step: 3, locale: 'en' })
 * @internal
 */
export async function buildSummarizerRequest(input: SummarizerInput): Promise<ChatRequest> {
  const { analyses, rubrics, step, locale } = input
  const lines = analyses
    .map((record) =>
      JSON.stringify({ rollout_id: record.rollout_id, score: Number(formatScore(record.score)), ...record.analysis }),
    )
    .join('\n')
  const boundary = await dataBoundary(lines)
  const stats = scoreStats(analyses)
  const user = renderPrompt(
    locale,
    'summarizer.user',
    {
      rubrics: rubricLines(rubrics, locale),
      step,
      ...statsValues(stats),
      boundary,
      analyses: lines,
    },
    input.prompts,
  )
  return {
    role: 'summarizer',
    messages: [
      { role: 'system', content: renderPrompt(locale, 'summarizer.system', {}, input.prompts) },
      { role: 'user', content: user },
    ],
    task: 'summarize',
    mock: mockSummarizerReply(analyses, step),
    json: true,
    ...withReplySchema('batch_summary', batchSummaryReplySchema(analyses.length)),
  }
}

/**
 * Reads a Summarizer reply into a `BatchSummary`: validated, example ids kept only when they name an
 * analysed rollout, the hacking count held to the number of rollouts, and the harness's stats attached.
 * @example parseSummarizerReply(reply.text, analyses)
 * @internal
 */
export function parseSummarizerReply(text: string, analyses: readonly AnalysisRecord[]): BatchSummary {
  return withStats(
    parseReplyAs(BatchSummaryReply, text, 'summarizer'),
    scoreStats(analyses),
    analyses.map((record) => record.rollout_id),
  )
}

/**
 * Summarises the analyses of one step (or chunk): one call, retried on transport failures and invalid replies.
 * @example const summary = await runSummarizer(model, { analyses, rubrics, step: 3, locale: 'en' })
 */
export async function runSummarizer(
  model: ChatModel,
  input: SummarizerInput,
  retry: Partial<RetryPolicy> = {},
): Promise<BatchSummary> {
  return runAgent(
    model,
    await buildSummarizerRequest(input),
    (text) => parseSummarizerReply(text, input.analyses),
    retry,
  )
}

/**
 * A reply made consistent with what the harness knows: examples restricted to `knownIds`, count at most
 * `stats.rollouts`.
 * @example withStats(reply, stats, ['r1', 'r2'])
 */
export function withStats(reply: BatchSummaryReply, stats: ScoreStats, knownIds: readonly string[]): BatchSummary {
  const known = new Set(knownIds)
  return {
    ...reply,
    reward_hacking: {
      ...reply.reward_hacking,
      count: Math.min(reply.reward_hacking.count, stats.rollouts),
      examples: reply.reward_hacking.examples.filter((id) => known.has(id)),
    },
    stats,
  }
}

/**
 * Prompt values for a batch's numbers.
 * @example renderPrompt('en', 'summarizer.user', { ...statsValues(stats), … })
 */
export function statsValues(
  stats: ScoreStats,
): Record<'rollouts' | 'mean_score' | 'min_score' | 'max_score' | 'flagged', string | number> {
  return {
    rollouts: stats.rollouts,
    mean_score: formatScore(stats.mean_score),
    min_score: formatScore(stats.min_score),
    max_score: formatScore(stats.max_score),
    flagged: stats.flagged,
  }
}

/**
 * A summary as the later agents read it inside a data block: the model-written part, as indented JSON
 * (the stats are shown outside the block, as the harness's own numbers).
 * @example summaryForPrompt(summary) // '{\n  "executive_summary": …'
 */
export function summaryForPrompt(summary: BatchSummary): string {
  const { stats: _stats, ...written } = summary
  return JSON.stringify(written, null, 2)
}
