import { Option } from 'commander'
import { STRUCTURED_OUTPUTS, type StructuredOutput } from '../../src/schemas/structured-output.ts'

/**
 * `--llm-structured-output <kind>` for a command's `--llm-base-url` judge: how it is asked for JSON. A small model on a
 * server that enforces the reply's schema (vLLM, SGLang, llama.cpp) writes a usable verdict; asked for any JSON, it
 * may ramble until `max_tokens`.
 * @example command.addOption(structuredOutputOption('json_object'))
 */
export function structuredOutputOption(fallback: StructuredOutput | undefined): Option {
  const option = new Option(
    '--llm-structured-output <kind>',
    "how --llm-base-url is asked for JSON: json_schema sends the reply's exact schema (vLLM, SGLang, OpenAI; " +
      'llama-cpp-python gets it its own way), json_object only asks for JSON',
  ).choices(STRUCTURED_OUTPUTS)
  return fallback === undefined ? option : option.default(fallback)
}
