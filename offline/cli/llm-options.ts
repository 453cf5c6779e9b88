import { Option } from 'commander'
import { STRUCTURED_OUTPUTS, type StructuredOutput } from '../../src/schemas/structured-output.ts'

/**
 * `--llm-structured-output <kind>` (or `flag`) for a command's `--llm-base-url` (or `endpoint`) judge: how it is asked
 * for JSON. A small model on a server that enforces the reply's schema (vLLM, SGLang, llama.cpp) writes a usable
 * verdict; asked for any JSON, it may ramble until `max_tokens`.
 * @example command.addOption(structuredOutputOption('json_object'))
 */
export function structuredOutputOption(
  fallback: StructuredOutput | undefined,
  { flag = '--llm-structured-output', endpoint = '--llm-base-url' } = {},
): Option {
  const option = new Option(
    `${flag} <kind>`,
    `how ${endpoint} is asked for JSON: json_schema sends the reply's exact schema (vLLM, SGLang, OpenAI; ` +
      'llama-cpp-python gets it its own way), json_object only asks for JSON',
  ).choices(STRUCTURED_OUTPUTS)
  return fallback === undefined ? option : option.default(fallback)
}
