import pLimit from 'p-limit'
import type { RetryPolicy } from '../../llm/retry.ts'
import type { ChatModel, ChatRequest } from '../../llm/types.ts'
import { renderPrompt, type Locale, type PromptOverrides } from '../../prompts/index.ts'
import { BatchSummaryReply, type AnalysisRecord, type BatchSummary, type ScoreStats } from '../../schemas/agents.ts'
import type { Rubric } from '../../schemas/rubric.ts'
import { dataBoundary, parseReplyAs, rubricLines, runAgent } from '../run-agent.ts'
import { runSummarizer, statsValues, withStats } from '../summarizer/index.ts'
import { batchSummaryReplySchema } from '../reply-schemas.ts'
import { withReplySchema } from '../../llm/response-format.ts'
import { mockMetaSummarizerReply } from './mock.ts'

/** @internal */
export interface MetaSummarizerInput {
  /** The run's prompt overrides, keyed `<locale>/<name>` (see RunConfig.prompts). */
  prompts?: PromptOverrides
  /** The chunk summaries of one step, in chunk order. */
  summaries: BatchSummary[]
  rubrics: Rubric[]
  step: number
  locale: Locale
  /** Every rollout id of the step; examples outside it are dropped. Default: the chunks' own examples. */
  rolloutIds?: string[]
}

/**
 * The chunks' numbers combined: counts add up, the mean is weighted by rollouts.
 * @example mergeStats([{ rollouts: 2, mean_score: 1, … }, { rollouts: 2, mean_score: 0, … }]).mean_score // 0.5
 */
function mergeStats(parts: readonly ScoreStats[]): ScoreStats {
  const counted = parts.filter((part) => part.rollouts > 0)
  const rollouts = counted.reduce((sum, part) => sum + part.rollouts, 0)
  if (rollouts === 0) return { rollouts: 0, mean_score: 0, min_score: 0, max_score: 0, flagged: 0 }
  return {
    rollouts,
    mean_score: counted.reduce((sum, part) => sum + part.mean_score * part.rollouts, 0) / rollouts,
    min_score: Math.min(...counted.map((part) => part.min_score)),
    max_score: Math.max(...counted.map((part) => part.max_score)),
    flagged: counted.reduce((sum, part) => sum + part.flagged, 0),
  }
}

/**
 * The MetaSummarizer's request: rubrics and the step's combined numbers first, then the chunk
 * summaries (model-written text) inside data markers, one JSON object per line.
 * @example const request = await buildMetaSummarizerRequest({ summaries, rubrics, step: 3, locale: 'en' })
 * @internal
 */
export async function buildMetaSummarizerRequest(input: MetaSummarizerInput): Promise<ChatRequest> {
  const { summaries, rubrics, step, locale } = input
  const stats = mergeStats(summaries.map((summary) => summary.stats))
  const lines = summaries.map((summary, index) => JSON.stringify({ chunk: index + 1, ...summary })).join('\n')
  const boundary = await dataBoundary(lines)
  const user = renderPrompt(
    locale,
    'meta-summarizer.user',
    {
      rubrics: rubricLines(rubrics, locale),
      step,
      chunks: summaries.length,
      ...statsValues(stats),
      boundary,
      summaries: lines,
    },
    input.prompts,
  )
  return {
    role: 'meta_summarizer',
    messages: [
      { role: 'system', content: renderPrompt(locale, 'meta-summarizer.system', {}, input.prompts) },
      { role: 'user', content: user },
    ],
    task: 'meta_summarize',
    mock: mockMetaSummarizerReply(summaries, step),
    json: true,
    ...withReplySchema('batch_summary', batchSummaryReplySchema(stats.rollouts)),
  }
}

/**
 * Reads a MetaSummarizer reply into a `BatchSummary` with the chunks' merged stats; example ids are
 * kept only when they are among `knownIds` (default: the chunks' own examples).
 * @example parseMetaSummarizerReply(reply.text, summaries)
 * @internal
 */
export function parseMetaSummarizerReply(
  text: string,
  summaries: readonly BatchSummary[],
  knownIds?: readonly string[],
): BatchSummary {
  const ids = knownIds ?? summaries.flatMap((summary) => summary.reward_hacking.examples)
  return withStats(
    parseReplyAs(BatchSummaryReply, text, 'meta-summarizer'),
    mergeStats(summaries.map((summary) => summary.stats)),
    ids,
  )
}

/**
 * Consolidates chunk summaries into one: one call, retried on transport failures and invalid replies.
 * @example const summary = await runMetaSummarizer(model, { summaries, rubrics, step: 3, locale: 'en' })
 * @internal
 */
export async function runMetaSummarizer(
  model: ChatModel,
  input: MetaSummarizerInput,
  retry: Partial<RetryPolicy> = {},
): Promise<BatchSummary> {
  return runAgent(
    model,
    await buildMetaSummarizerRequest(input),
    (text) => parseMetaSummarizerReply(text, input.summaries, input.rolloutIds),
    retry,
  )
}

export interface SummarizeStepOptions {
  rubrics: Rubric[]
  prompts?: PromptOverrides
  step: number
  locale: Locale
  retry?: Partial<RetryPolicy>
  /** Highest number of chunk summaries in flight at once (default 4). */
  concurrency?: number
  /** The MetaSummarizer's model when that role has its own settings (default: `model`). */
  metaModel?: ChatModel
}

export interface StepSummary {
  /** The step's summary: the single summary, or the consolidation of the chunk summaries. */
  summary: BatchSummary
  /** The chunk summaries when the step was chunked; empty when one call covered it. */
  chunks: BatchSummary[]
}

/**
 * Summarises one step of one instance. Up to `chunkSize` analyses take one Summarizer call; more are
 * cut into chunks of `chunkSize`, summarised concurrently (at most `concurrency` at once), and the
 * chunk summaries consolidated by the MetaSummarizer (in rounds of at most `chunkSize` summaries
 * when there are very many). 40 analyses with chunkSize 16: 3 chunk calls, then 1 consolidation.
 * @example const { summary } = await summarizeStep(model, analyses, 16, { rubrics, step: 3, locale: 'en' })
 */
export async function summarizeStep(
  model: ChatModel,
  analyses: readonly AnalysisRecord[],
  chunkSize: number,
  options: SummarizeStepOptions,
): Promise<StepSummary> {
  if (analyses.length === 0) throw new RangeError('summarizeStep needs at least one analysis')
  if (!Number.isInteger(chunkSize) || chunkSize < 1)
    throw new RangeError(`chunk size ${chunkSize} is not a positive integer`)
  const { rubrics, step, locale, prompts, retry = {}, concurrency = 4, metaModel = model } = options
  const limit = pLimit(Math.max(1, concurrency))
  const summarize = (part: AnalysisRecord[]) =>
    limit(() => runSummarizer(model, { analyses: part, rubrics, step, locale, ...(prompts ? { prompts } : {}) }, retry))
  if (analyses.length <= chunkSize) return { summary: await summarize([...analyses]), chunks: [] }

  const chunks = await Promise.all(chunksOf([...analyses], chunkSize).map(summarize))
  const rolloutIds = analyses.map((record) => record.rollout_id)
  const fanIn = Math.max(2, chunkSize)
  let level = chunks
  while (level.length > 1) {
    level = await Promise.all(
      chunksOf(level, fanIn).map((group) =>
        group.length === 1
          ? Promise.resolve(group[0]!)
          : limit(() =>
              runMetaSummarizer(
                metaModel,
                { summaries: group, rubrics, step, locale, rolloutIds, ...(prompts ? { prompts } : {}) },
                retry,
              ),
            ),
      ),
    )
  }
  return { summary: level[0]!, chunks }
}

function chunksOf<T>(items: T[], size: number): T[][] {
  const chunks: T[][] = []
  for (let start = 0; start < items.length; start += size) chunks.push(items.slice(start, start + size))
  return chunks
}
