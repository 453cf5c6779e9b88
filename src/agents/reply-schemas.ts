import { boundedText, closedObject, integerEnum, type JsonObjectSchema, proseText } from '../llm/response-format.ts'

/*
 * The JSON schemas the rubric-evolution agents (analyzer, summarizers, query generator, updater) send for their
 * replies where the role's server enforces one (`structured_output: json_schema | json_object_schema`). Each is the
 * shape its zod schema (src/schemas/agents.ts) reads, with every text and list bounded: a grammar-constrained small
 * model then has to close each string and list and finishes its reply inside the role's `max_tokens`, where held to
 * plain `json_object` it writes JSON until it is cut. The bounds sit under what the zod schemas keep, so a big model
 * loses nothing it would have kept.
 */

/** A text the model writes, up to `max` characters, never opening with a copied `<slot>`; empty where `optional`. */
const text = (max: number, optional = false): JsonObjectSchema => proseText(max, optional ? 0 : 1)
/** A list of at most `max` short texts the model writes, or quotes (`quoted`: an answer's own words, any opening). */
const list = (max: number, chars: number, quoted = false): JsonObjectSchema => ({
  type: 'array',
  maxItems: max,
  items: quoted ? boundedText(chars) : proseText(chars),
})

/**
 * The Analyzer's reply: an `Analysis`.
 * @example analysisReplySchema().required // ['overall_assessment', 'stage_performance', 'reward_hacking', …]
 */
export function analysisReplySchema(): JsonObjectSchema {
  return closedObject({
    overall_assessment: text(400),
    stage_performance: text(240, true),
    reward_hacking: closedObject({
      flag: { type: 'boolean' },
      evidence: list(3, 200, true),
      severity: { type: 'string', enum: ['none', 'low', 'medium', 'high'] },
      tactics: list(3, 80),
    }),
    advancement_strategy: text(240, true),
    rubric_effectiveness: text(240, true),
    observations: list(3, 200),
  })
}

/**
 * The Summarizer's and MetaSummarizer's reply: a `BatchSummaryReply` about `rollouts` analysed rollouts (the hacking
 * count is at most that).
 * @example batchSummaryReplySchema(8).properties.reward_hacking
 */
export function batchSummaryReplySchema(rollouts: number): JsonObjectSchema {
  return closedObject({
    executive_summary: text(500),
    systemic_patterns: list(4, 200),
    reward_hacking: closedObject({
      count: integerEnum(0, Math.min(rollouts, 64)),
      tactics: list(4, 80),
      examples: list(4, 64, true),
    }),
    rubric_meta_evaluation: text(400, true),
    evolution_plan: text(400, true),
    memory_entry: text(400),
  })
}

/**
 * The QueryGenerator's reply: 1..`maxQueries` memory queries.
 * @example queryListReplySchema(3).properties.queries.maxItems // 3
 */
export function queryListReplySchema(maxQueries: number): JsonObjectSchema {
  return closedObject({ queries: { type: 'array', minItems: 1, maxItems: Math.max(1, maxQueries), items: text(200) } })
}

/**
 * The Updater's reply: a `RubricUpdate` whose adaptive set may grow by at most three rubrics from the `adaptive`
 * weights in force (and stays within `limit`). A weight is one of 1..5 or a weight in force, listed (an unbounded
 * number lets a small model write digits until it is cut). Every field is required, a removal's text included (an empty
 * string), since a grammar with optional keys lets a small model leave out the ones that matter; but a proposal's
 * `kind`, which left out keeps a kept rubric's own.
 * @example rubricUpdateReplySchema([1, 1.5], 50).properties.final_adaptive.maxItems // 5
 */
export function rubricUpdateReplySchema(adaptive: readonly number[], limit: number): JsonObjectSchema {
  const weight = { type: 'number', enum: [...new Set([1, 2, 3, 4, 5, ...adaptive])].sort((a, b) => a - b) }
  return closedObject({
    strategy: { type: 'string', enum: ['MAINTENANCE', 'CORRECTIVE', 'ADVANCEMENT'] },
    consulted_memories: list(3, 120),
    rationale: text(400),
    modifications: {
      type: 'array',
      maxItems: 4,
      items: closedObject({
        op: { type: 'string', enum: ['add', 'modify', 'remove', 'reweight'] },
        rubric_id: text(64),
        text: text(300, true),
        weight,
        reason: text(160, true),
      }),
    },
    final_adaptive: {
      type: 'array',
      maxItems: Math.min(limit, adaptive.length + 3),
      items: closedObject(
        { id: text(64), text: text(300), weight },
        { kind: { type: 'string', enum: ['criterion', 'penalty'] } },
      ),
    },
  })
}
