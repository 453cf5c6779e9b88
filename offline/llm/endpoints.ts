/**
 * Endpoint configuration for the offline LLM pool: one entry per OpenAI-compatible server (vLLM,
 * Ollama, OpenAI, …), from an endpoints file or from `--endpoint` command-line flags.
 */
import { readFile } from 'node:fs/promises'
import { z } from 'zod'
import { strict } from '../../src/schemas/strict.ts'
import { STRUCTURED_OUTPUTS } from '../../src/schemas/structured-output.ts'

/**
 * One OpenAI-compatible server of the pool. `api_key_env` names an environment variable; keys are
 * never written in the file. `structured_output: 'json_schema'` marks servers that accept
 * `response_format: {type: 'json_schema'}` (vLLM ≥ 0.6, OpenAI); the others get `json_object`.
 * @example EndpointConfig.parse({ base_url: 'http://gpu-1:8000/v1', max_concurrency: 8 })
 */
export const EndpointConfig = z
  .object({
    /** Shown in usage and events; defaults to `base_url`. */
    name: z.string().min(1).max(100).optional(),
    base_url: z.url({ protocol: /^https?$/, error: 'an http(s) URL such as http://gpu-1:8000/v1' }),
    api_key_env: z
      .string()
      .regex(/^[A-Z_][A-Z0-9_]*$/, 'an environment variable name such as VLLM_API_KEY')
      .optional(),
    /** The model name at this server; defaults to the pool's `model`. */
    model: z.string().min(1).max(200).optional(),
    /** Most requests the pool keeps in flight at this server. Never exceeded. */
    max_concurrency: z
      .number({ error: 'a positive integer' })
      .int('a positive integer')
      .min(1, 'at least 1')
      .max(1_024),
    structured_output: z.enum(STRUCTURED_OUTPUTS).default('json_object'),
  })
  .apply(strict)
export type EndpointConfig = z.infer<typeof EndpointConfig>
export type EndpointConfigInput = z.input<typeof EndpointConfig>

const EndpointList = z.array(EndpointConfig).min(1, 'at least one endpoint')
const EndpointsDocument = z.object({ endpoints: EndpointList }).apply(strict)

/**
 * A malformed endpoints file or `--endpoint` flag; the message names the file or flag and the field.
 * @example try { await loadEndpointsFile(file) } catch (error) { if (error instanceof EndpointConfigError)
 *   usage(error.message) }
 */
export class EndpointConfigError extends Error {
  override name = 'EndpointConfigError'
}

/**
 * Validates endpoint definitions: `{endpoints: [...]}` or a plain list. Errors name each bad field
 * (`endpoints[1].max_concurrency: at least 1`) and no base URL may appear twice.
 * @example parseEndpoints([{ base_url: 'http://gpu-1:8000/v1', max_concurrency: 4 }], 'flags')
 */
export function parseEndpoints(value: unknown, source = 'endpoints'): EndpointConfig[] {
  const plainList = Array.isArray(value)
  const parsed = plainList ? EndpointList.safeParse(value) : EndpointsDocument.safeParse(value)
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => {
      const field = formatPath(issue.path)
      return field === '' ? issue.message : `${field}: ${issue.message}`
    })
    throw new EndpointConfigError(`${source}: ${problems.join('; ')}`)
  }
  const endpoints = Array.isArray(parsed.data) ? parsed.data : parsed.data.endpoints
  const seen = new Map<string, number>()
  endpoints.forEach((endpoint, index) => {
    const key = endpoint.base_url.replace(/\/+$/, '')
    const first = seen.get(key)
    const field = plainList ? `[${index}].base_url` : `endpoints[${index}].base_url`
    if (first !== undefined)
      throw new EndpointConfigError(`${source}: ${field}: ${endpoint.base_url} is already endpoint ${first}`)
    seen.set(key, index)
  })
  const names = endpoints.map((endpoint) => endpoint.name ?? endpoint.base_url)
  const repeated = names.find((name, index) => names.indexOf(name) !== index)
  if (repeated !== undefined) throw new EndpointConfigError(`${source}: endpoint name "${repeated}" is used twice`)
  return endpoints
}

/**
 * Reads and validates an endpoints file (JSON): `{"endpoints": [...]}` or a plain list.
 * @example const endpoints = await loadEndpointsFile('config/endpoints.json')
 */
export async function loadEndpointsFile(path: string): Promise<EndpointConfig[]> {
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (error) {
    throw new EndpointConfigError(`${path}: cannot read the endpoints file (${(error as Error).message})`)
  }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (error) {
    throw new EndpointConfigError(`${path}: not JSON (${(error as Error).message})`)
  }
  return parseEndpoints(value, path)
}

/**
 * Parses one `--endpoint` flag: a base URL, then optional `key=value` settings after commas
 * (`max_concurrency`, `model`, `api_key_env`, `structured_output`, `name`).
 * `defaultConcurrency` applies when the flag sets no `max_concurrency`.
 * @example parseEndpointFlag('http://gpu-1:8000/v1,max_concurrency=8,structured_output=json_schema')
 */
export function parseEndpointFlag(flag: string, defaultConcurrency = 4): EndpointConfig {
  const [url = '', ...settings] = flag.split(',').map((part) => part.trim())
  const entry: Record<string, unknown> = { base_url: url, max_concurrency: defaultConcurrency }
  for (const setting of settings) {
    const eq = setting.indexOf('=')
    if (eq <= 0) throw new EndpointConfigError(`--endpoint ${flag}: "${setting}" is not key=value`)
    const key = setting.slice(0, eq)
    const raw = setting.slice(eq + 1)
    entry[key] = key === 'max_concurrency' ? (/^\d+$/.test(raw) ? Number(raw) : raw) : raw
  }
  const parsed = EndpointConfig.safeParse(entry)
  if (!parsed.success) {
    throw new EndpointConfigError(
      `--endpoint ${flag}: ` +
        `${parsed.error.issues.map((issue) => `${formatPath(issue.path) || 'value'}: ${issue.message}`).join('; ')}`,
    )
  }
  return parsed.data
}

/**
 * Parses every `--endpoint` flag of a command line (repeatable), validated together (no duplicates).
 * @example endpointsFromFlags(['http://gpu-1:8000/v1', 'http://gpu-2:8000/v1,max_concurrency=2'], 8)
 */
export function endpointsFromFlags(flags: readonly string[], defaultConcurrency = 4): EndpointConfig[] {
  if (flags.length === 0) throw new EndpointConfigError('--endpoint: at least one endpoint')
  return parseEndpoints(
    flags.map((flag) => parseEndpointFlag(flag, defaultConcurrency)),
    '--endpoint',
  )
}

/** `['endpoints', 1, 'max_concurrency']` → `endpoints[1].max_concurrency`. */
function formatPath(path: readonly PropertyKey[]): string {
  let out = ''
  for (const part of path)
    out += typeof part === 'number' ? `[${part}]` : out === '' ? String(part) : `.${String(part)}`
  return out
}
