/**
 * How a role asks its server for JSON: `json_object` (every OpenAI-compatible server), `json_schema` (the reply's exact
 * schema, OpenAI's shape: vLLM, SGLang, OpenAI), `json_object_schema` (the schema inside `json_object`:
 * llama-cpp-python). In a file of its own, without zod, so that the CLI's flags can name them without loading it.
 */
export const STRUCTURED_OUTPUTS = ['json_object', 'json_schema', 'json_object_schema'] as const
export type StructuredOutput = (typeof STRUCTURED_OUTPUTS)[number]
