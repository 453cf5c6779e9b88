import type { StructuredOutput } from '../schemas/structured-output.ts'

/** `max_tokens` of a request when neither the role's settings nor the request say how long its reply may be. */
export const DEFAULT_MAX_TOKENS = 1_024

/** A `response_format` an OpenAI-compatible server takes. */
export type ResponseFormat =
  | { type: 'json_object'; schema?: Record<string, unknown> }
  | {
      type: 'json_schema'
      json_schema: { name: string; schema: Record<string, unknown>; strict: boolean; description?: string }
    }

/** A JSON schema for structured output, as OpenAI-compatible servers take it. */
export interface JsonSchemaFormat {
  /** a-z, A-Z, 0-9, _ and -, at most 64 characters. */
  name: string
  schema: Record<string, unknown>
  description?: string
  /** Default true. */
  strict?: boolean
}

/**
 * The `response_format` for a request: the schema in the endpoint's shape where the endpoint enforces one and the
 * request carries a schema, else `json_object` when the request wants JSON (or carries a schema), else none.
 * @example responseFormatFor({ json: true, jsonSchema: { name: 'grades', schema } }, 'json_schema').type //
 *   'json_schema'
 */
export function responseFormatFor(
  request: { json: boolean; jsonSchema?: JsonSchemaFormat | undefined },
  support: StructuredOutput,
): ResponseFormat | undefined {
  const schema = request.jsonSchema
  if (schema && support === 'json_schema') {
    return {
      type: 'json_schema',
      json_schema: {
        name: schema.name,
        schema: schema.schema,
        strict: schema.strict ?? true,
        ...(schema.description ? { description: schema.description } : {}),
      },
    }
  }
  if (schema && support === 'json_object_schema') return { type: 'json_object', schema: schema.schema }
  return request.json || schema ? { type: 'json_object' } : undefined
}

/**
 * The same schema in llama-cpp-python's shape, for a server that refused OpenAI's; other formats as they are.
 * @example asJsonObjectSchema({ type: 'json_schema', json_schema: { name: 'g', schema, strict: true } }) //
 *   { type: 'json_object', schema }
 */
export function asJsonObjectSchema(format: ResponseFormat): ResponseFormat {
  return format.type === 'json_schema' ? { type: 'json_object', schema: format.json_schema.schema } : format
}

/**
 * Whether a server's refusal says it takes only `text` and `json_object` as `response_format` types: pydantic's
 * words in llama-cpp-python ("Input should be 'text' or 'json_object'"), which it reports as an HTTP 500.
 * @example refusesJsonSchema("Input should be 'text' or 'json_object'") // true
 */
export function refusesJsonSchema(message: string): boolean {
  return /'text' or 'json_object'/.test(message)
}

/** A JSON schema object (structured output). */
export type JsonObjectSchema = Record<string, unknown>

/**
 * An object schema with exactly these properties, the `required` ones required, and no other.
 * @example closedObject({ grades: { type: 'object' } }).additionalProperties // false
 */
export function closedObject(
  required: Record<string, JsonObjectSchema>,
  optional: Record<string, JsonObjectSchema> = {},
): JsonObjectSchema {
  return {
    type: 'object',
    properties: { ...required, ...optional },
    required: Object.keys(required),
    additionalProperties: false,
  }
}

/**
 * An object schema with exactly these keys, each required, each with the same value schema.
 * @example keyedBy(['A1', 'A2'], { type: 'integer' }).required // ['A1', 'A2']
 */
export function keyedBy(keys: readonly string[], value: JsonObjectSchema): JsonObjectSchema {
  return closedObject(Object.fromEntries(keys.map((key) => [key, value])))
}

/**
 * A grade: an integer in 0..gradeMax, listed as an enum. Grammar-based servers (llama.cpp's json-schema-to-grammar in
 * llama-cpp-python) drop `minimum`/`maximum` and let a small model write 234567890; every server enforces an enum.
 * @example gradeSchema(2) // { type: 'integer', enum: [0, 1, 2] }
 */
export function gradeSchema(gradeMax: number): JsonObjectSchema {
  return integerEnum(0, gradeMax)
}

/**
 * An integer in `from`..`to`, listed as an enum: grammar-based servers drop `minimum` and `maximum` (see
 * {@link gradeSchema}).
 * @example integerEnum(1, 3) // { type: 'integer', enum: [1, 2, 3] }
 */
export function integerEnum(from: number, to: number): JsonObjectSchema {
  return { type: 'integer', enum: Array.from({ length: to - from + 1 }, (_, index) => from + index) }
}

/**
 * A string of `minLength`..`maxLength` characters: a bound a grammar-constrained model has to close its string by.
 * @example boundedText(300) // { type: 'string', minLength: 1, maxLength: 300 }
 */
export function boundedText(maxLength: number, minLength = 1): JsonObjectSchema {
  return { type: 'string', minLength, maxLength }
}

/**
 * Free text a model writes itself, of `minLength`..`maxLength` characters, that cannot open with `<`: a model held to
 * it by a grammar cannot copy its prompt's `"<2-4 sentences>"` back, and writes words instead. The bound is inside the
 * `pattern` too, since llama.cpp's grammar drops `maxLength` beside a `pattern`; prose needs no quote, backslash or
 * line break, which the pattern leaves out (a JSON escape would need them).
 * @example proseText(300).pattern // '^[^<"\\\n][^"\\\n]{0,299}$'
 */
export function proseText(maxLength: number, minLength = 1): JsonObjectSchema {
  const opening = '[^<"\\\\\\n]'
  const rest = `[^"\\\\\\n]{${Math.max(0, minLength - 1)},${maxLength - 1}}`
  const pattern = minLength > 0 ? `^${opening}${rest}$` : `^(${opening}${rest})?$`
  return { type: 'string', minLength, maxLength, pattern }
}

/**
 * The part of a request that asks for a reply under `schema`: the schema, and room for its longest reply.
 * @example const request = { role: 'analyzer', messages, json: true, ...withReplySchema('analysis', schema) }
 */
export function withReplySchema(
  name: string,
  schema: JsonObjectSchema,
): { jsonSchema: { name: string; schema: JsonObjectSchema }; maxTokens: number } {
  return { jsonSchema: { name, schema }, maxTokens: replyTokens(schema) }
}

/** Characters a model writes per token at the least, for the room a bounded reply needs (JSON keys, short words). */
const CHARS_PER_TOKEN = 3

/**
 * The `max_tokens` a reply under `schema` needs at the most: its longest serialisation (every string and list at its
 * bound) at {@link CHARS_PER_TOKEN} characters a token, never under `floor` (the room an agent had without a schema).
 * A reply held to the schema then finishes rather than being cut.
 * @example replyTokens(closedObject({ verdict: { type: 'string', enum: ['A', 'B'] } })) // 1024
 */
function replyTokens(schema: JsonObjectSchema, floor = DEFAULT_MAX_TOKENS): number {
  return Math.max(floor, Math.ceil(longestReply(schema) / CHARS_PER_TOKEN))
}

/** The most characters a value under `schema` serialises to; an unbounded part counts as nothing. */
function longestReply(schema: JsonObjectSchema): number {
  if (Array.isArray(schema.enum)) return Math.max(...schema.enum.map((value) => JSON.stringify(value).length))
  switch (schema.type) {
    case 'object': {
      const properties = Object.entries((schema.properties ?? {}) as Record<string, JsonObjectSchema>)
      return 2 + properties.reduce((sum, [key, value]) => sum + key.length + 4 + longestReply(value), 0)
    }
    case 'array':
      return 2 + Number(schema.maxItems ?? 0) * (2 + longestReply(schema.items as JsonObjectSchema))
    case 'string':
      return 2 + Number(schema.maxLength ?? 0)
    case 'boolean':
      return 5
    default:
      return 0
  }
}
