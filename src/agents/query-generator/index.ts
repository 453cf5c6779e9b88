import type { RetryPolicy } from '../../llm/retry.ts'
import { LlmError, type ChatModel, type ChatRequest } from '../../llm/types.ts'
import { renderPrompt, type Locale, type PromptOverrides } from '../../prompts/index.ts'
import { QueryList, type BatchSummary } from '../../schemas/agents.ts'
import type { Rubric } from '../../schemas/rubric.ts'
import { dataBoundary, formatScore, parseReplyAs, rubricLines, runAgent } from '../run-agent.ts'
import { summaryForPrompt } from '../summarizer/index.ts'
import { queryListReplySchema } from '../reply-schemas.ts'
import { withReplySchema } from '../../llm/response-format.ts'
import { mockQueryGeneratorReply } from './mock.ts'

export interface QueryGeneratorInput {
  /** The run's prompt overrides, keyed `<locale>/<name>` (see RunConfig.prompts). */
  prompts?: PromptOverrides
  summary: BatchSummary
  rubrics: Rubric[]
  /** The most queries to keep; the model is asked for as many as the summary calls for, up to this. */
  maxQueries: number
  locale: Locale
}

/**
 * The QueryGenerator's request: rubrics, the step's numbers and the cap first, then the step summary
 * (model-written text) inside data markers.
 * @example const request = await buildQueryGeneratorRequest({ summary, rubrics, maxQueries: 5, locale: 'en' })
 * @internal
 */
export async function buildQueryGeneratorRequest(input: QueryGeneratorInput): Promise<ChatRequest> {
  const { summary, rubrics, maxQueries, locale } = input
  const written = summaryForPrompt(summary)
  const boundary = await dataBoundary(written)
  const user = renderPrompt(
    locale,
    'query-generator.user',
    {
      rubrics: rubricLines(rubrics, locale),
      rollouts: summary.stats.rollouts,
      mean_score: formatScore(summary.stats.mean_score),
      flagged: summary.stats.flagged,
      max_queries: maxQueries,
      boundary,
      summary: written,
    },
    input.prompts,
  )
  return {
    role: 'query_generator',
    messages: [
      { role: 'system', content: renderPrompt(locale, 'query-generator.system', {}, input.prompts) },
      { role: 'user', content: user },
    ],
    task: 'generate_queries',
    mock: mockQueryGeneratorReply(summary, maxQueries),
    json: true,
    ...withReplySchema('queries', queryListReplySchema(maxQueries)),
  }
}

/**
 * Reads a QueryGenerator reply: non-empty queries, de-duplicated (case, spacing and end punctuation
 * ignored), capped at `maxQueries`. No query at all is an `invalid_reply`.
 * @example parseQueryReply('{"queries": ["keyword stuffing", "Keyword stuffing.", ""]}', 5) // ['keyword stuffing']
 * @internal
 */
export function parseQueryReply(text: string, maxQueries: number): string[] {
  const seen = new Set<string>()
  const queries = parseReplyAs(QueryList, text, 'query generator').queries.filter((query) => {
    const key = query
      .toLowerCase()
      .replace(/\s+/g, ' ')
      .replace(/[\s.?!;,。？！；，]+$/u, '')
    if (!key || seen.has(key)) return false
    seen.add(key)
    return true
  })
  if (queries.length === 0) throw new LlmError('invalid_reply', 'query generator reply has no query')
  return queries.slice(0, Math.max(1, maxQueries))
}

/**
 * Writes the memory queries for a step summary: one call, retried on transport failures and invalid replies.
 * @example const queries = await runQueryGenerator(model, { summary, rubrics, maxQueries: 5, locale: 'en' })
 */
export async function runQueryGenerator(
  model: ChatModel,
  input: QueryGeneratorInput,
  retry: Partial<RetryPolicy> = {},
): Promise<string[]> {
  return runAgent(
    model,
    await buildQueryGeneratorRequest(input),
    (text) => parseQueryReply(text, input.maxQueries),
    retry,
  )
}
