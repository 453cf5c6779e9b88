import type { ResponseFormat } from '../../src/llm/openai.ts'

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
 * The `response_format` for a request: `json_schema` where the endpoint supports it and the request
 * carries a schema, else `json_object` when the request wants JSON (or carries a schema), else none.
 * @example responseFormatFor({ json: true, jsonSchema: { name: 'grades', schema } }, 'json_schema').type //
 *   'json_schema'
 */
export function responseFormatFor(
  request: { json: boolean; jsonSchema?: JsonSchemaFormat | undefined },
  support: 'json_object' | 'json_schema',
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
  return request.json || schema ? { type: 'json_object' } : undefined
}
