/**
 * The reply schemas of the rubric-evolution agents (analyzer, summarizers, query generator, updater): what a server
 * that enforces them lets a model write is bounded (a small model has to close every string and list), always reads
 * with the agent's own parser, and fits the room the request asks for.
 */
import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import { buildAnalyzerRequest, parseAnalyzerReply } from '../../src/agents/analyzer/index.ts'
import { buildMetaSummarizerRequest, parseMetaSummarizerReply } from '../../src/agents/meta-summarizer/index.ts'
import { buildQueryGeneratorRequest, parseQueryReply } from '../../src/agents/query-generator/index.ts'
import { buildSummarizerRequest, parseSummarizerReply, scoreStats } from '../../src/agents/summarizer/index.ts'
import { buildUpdaterRequest, parseUpdaterReply } from '../../src/agents/updater/index.ts'
import type { JsonObjectSchema } from '../../src/llm/response-format.ts'
import type { ChatRequest } from '../../src/llm/types.ts'
import type { AnalysisRecord, BatchSummary } from '../../src/schemas/agents.ts'
import { rubric } from '../support/rubrics.ts'

const RUBRICS = [rubric('a1', 'The final answer is correct.', { is_anchor: true }), rubric('d1', 'Shows the steps.')]
const ROLLOUT = { id: 'r1', input: 'What is 2+2?', output: '4' }
const ANALYSIS = {
  overall_assessment: 'Correct.',
  stage_performance: '',
  reward_hacking: { flag: false, evidence: [], severity: 'none' as const, tactics: [] },
  advancement_strategy: '',
  rubric_effectiveness: '',
  observations: [],
}
const RECORDS: AnalysisRecord[] = [
  { rollout_id: 'r1', score: 1, analysis: ANALYSIS },
  { rollout_id: 'r2', score: 0, analysis: ANALYSIS },
]
const SUMMARY: BatchSummary = {
  executive_summary: 'Fine.',
  systemic_patterns: [],
  reward_hacking: { count: 0, tactics: [], examples: [] },
  rubric_meta_evaluation: '',
  evolution_plan: '',
  memory_entry: 'step 3: fine.',
  stats: scoreStats(RECORDS),
}

/** Each agent's request, and its parser. */
const AGENTS: Record<string, { request: () => Promise<ChatRequest>; parse: (text: string) => unknown }> = {
  analyzer: {
    request: () =>
      buildAnalyzerRequest({
        rollout: ROLLOUT,
        metadata: { high_level_goal: 'math', model_size: '7B', current_step: 3, total_steps: 10 },
        rubrics: RUBRICS,
        score: 1,
        criteria: [{ rubric_id: 'a1', grade: 4, weight: 1 }],
        gradeMax: 4,
        locale: 'en',
      }),
    parse: parseAnalyzerReply,
  },
  summarizer: {
    request: () => buildSummarizerRequest({ analyses: RECORDS, rubrics: RUBRICS, step: 3, locale: 'en' }),
    parse: (text) => parseSummarizerReply(text, RECORDS),
  },
  'meta-summarizer': {
    request: () =>
      buildMetaSummarizerRequest({ summaries: [SUMMARY, SUMMARY], rubrics: RUBRICS, step: 3, locale: 'en' }),
    parse: (text) => parseMetaSummarizerReply(text, [SUMMARY, SUMMARY]),
  },
  'query generator': {
    request: () => buildQueryGeneratorRequest({ summary: SUMMARY, rubrics: RUBRICS, maxQueries: 3, locale: 'en' }),
    parse: (text) => parseQueryReply(text, 3),
  },
  updater: {
    request: () =>
      buildUpdaterRequest({ rubrics: RUBRICS, summary: SUMMARY, memories: '', step: 3, stage: 'early', locale: 'en' }),
    parse: parseUpdaterReply,
  },
}

type Extreme = 'longest' | 'shortest'

/** The reply a schema-enforcing server lets through at one extreme: every bound reached, or every minimum. */
function extremeReply(schema: JsonObjectSchema, extreme: Extreme, index = 0): unknown {
  if (Array.isArray(schema.enum)) return extreme === 'longest' ? schema.enum.at(-1) : schema.enum[0]
  switch (schema.type) {
    case 'object': {
      const properties = Object.entries(schema.properties as Record<string, JsonObjectSchema>)
      const required = new Set(schema.required as string[])
      return Object.fromEntries(
        properties
          .filter(([key]) => extreme === 'longest' || required.has(key))
          .map(([key, value]) => [key, extremeReply(value, extreme)]),
      )
    }
    case 'array': {
      const count = Number(extreme === 'longest' ? schema.maxItems : (schema.minItems ?? 0))
      return Array.from({ length: count }, (_, item) => extremeReply(schema.items as JsonObjectSchema, extreme, item))
    }
    case 'string': {
      const length = Number(extreme === 'longest' ? schema.maxLength : (schema.minLength ?? 0))
      // Items of a list differ (lists drop repeats), and a text of one letter says something.
      return `${index}`.padEnd(length, 'x').slice(0, length)
    }
    case 'boolean':
      return extreme === 'longest'
    default:
      throw new Error(`no extreme for ${JSON.stringify(schema)}`)
  }
}

/** Where a schema lets a model write without end: a string without maxLength, a list without maxItems, any number. */
function unbounded(schema: JsonObjectSchema, path = '$'): string[] {
  if (Array.isArray(schema.enum)) return []
  switch (schema.type) {
    case 'object':
      return Object.entries(schema.properties as Record<string, JsonObjectSchema>).flatMap(([key, value]) =>
        unbounded(value, `${path}.${key}`),
      )
    case 'array':
      return [
        ...(schema.maxItems === undefined ? [path] : []),
        ...unbounded(schema.items as JsonObjectSchema, `${path}[]`),
      ]
    case 'string':
      return schema.maxLength === undefined ? [path] : []
    case 'boolean':
      return []
    default:
      return [path]
  }
}

/** The string schemas under `schema` that carry a pattern (the texts a model writes itself). */
function patterned(schema: JsonObjectSchema): JsonObjectSchema[] {
  if (schema.type === 'string') return typeof schema.pattern === 'string' ? [schema] : []
  if (schema.type === 'array') return patterned(schema.items as JsonObjectSchema)
  if (schema.type !== 'object') return []
  return Object.values(schema.properties as Record<string, JsonObjectSchema>).flatMap(patterned)
}

describe.each(Object.entries(AGENTS))('the %s’s reply schema', (_agent, { request, parse }) => {
  it('bounds each text the model writes inside its pattern, none opening with a copied <slot>', async () => {
    const { jsonSchema } = await request()
    const texts = patterned(jsonSchema!.schema)
    expect(texts.length).toBeGreaterThan(0)
    for (const text of texts) {
      // llama.cpp's grammar keeps a pattern and drops maxLength beside it: the pattern itself must bound the text.
      const pattern = new RegExp(text.pattern as string)
      const max = Number(text.maxLength)
      expect(pattern.test('a'.repeat(max))).toBe(true)
      expect(pattern.test('a'.repeat(max + 1))).toBe(false)
      expect(pattern.test('<2-4 sentences>')).toBe(false)
      expect(pattern.test('')).toBe(Number(text.minLength) === 0)
    }
  })

  it('bounds every string, list and number, and closes every object', async () => {
    const { jsonSchema } = await request()
    expect(jsonSchema, 'a schema is sent').toBeDefined()
    expect(unbounded(jsonSchema!.schema)).toEqual([])
    expect(JSON.stringify(jsonSchema!.schema)).not.toContain('"additionalProperties":true')
  })

  it.each(['longest', 'shortest'] as const)(
    'lets through a %s reply that the agent’s parser reads',
    async (extreme) => {
      const { jsonSchema } = await request()
      const reply = extremeReply(jsonSchema!.schema, extreme)
      expect(z.fromJSONSchema(jsonSchema!.schema as never).safeParse(reply).success).toBe(true)
      expect(() => parse(JSON.stringify(reply))).not.toThrow()
    },
  )

  it('asks for room for its longest reply at three characters a token', async () => {
    const { jsonSchema, maxTokens } = await request()
    const longest = JSON.stringify(extremeReply(jsonSchema!.schema, 'longest'))
    expect(longest.length).toBeLessThanOrEqual(3 * maxTokens!)
    expect(maxTokens).toBeGreaterThanOrEqual(1024)
  })
})

describe('the schemas’ limits', () => {
  it('hold a hacking count to the rollouts analysed, and the updater’s weights to 1..5 and those in use', async () => {
    const summarizer = (await AGENTS.summarizer!.request()).jsonSchema!.schema
    const count = extremeReply(summarizer, 'longest') as { reward_hacking: { count: number } }
    expect(count.reward_hacking.count).toBe(RECORDS.length)
    const custom = [rubric('a1', 'Correct.', { is_anchor: true }), rubric('d1', 'Steps.', { weight: 1.5 })]
    const { jsonSchema } = await buildUpdaterRequest({
      rubrics: custom,
      summary: SUMMARY,
      memories: '',
      step: 3,
      stage: 'early',
      locale: 'en',
    })
    const finalAdaptive = (jsonSchema!.schema.properties as Record<string, JsonObjectSchema>).final_adaptive!
    expect(finalAdaptive.maxItems).toBe(4)
    const item = finalAdaptive.items as { properties: { weight: { enum: number[] } } }
    expect(item.properties.weight.enum).toEqual([1, 1.5, 2, 3, 4, 5])
  })
})
