/**
 * The config knobs' flags of `reward-harness search` (the other flags are in ./flags.ts) and how the flags become a
 * run's settings. Every knob of `SearchConfig` has a flag named after it (`population_size` ↔ `--population-size`);
 * `--config file.json` sets knobs from a file, and flags override the file. A bad value exits with code 2 and names
 * the flag (or the file and key).
 */
import { readFile } from 'node:fs/promises'
import { resolve } from 'node:path'
import { type Command, Option } from 'commander'
import { DatasetError } from '../../src/datasets/errors.ts'
import { readJsonDocument } from '../../src/datasets/json-text.ts'
import { z } from 'zod'
import {
  KNOB_GROUPS,
  type KnobMeta,
  parseSearchConfig,
  SearchConfig,
  type SearchConfigInput,
} from '../../src/search/config.ts'
import { unknownKeysMessage } from '../../src/schemas/strict.ts'
import { ContentExtraction } from '../../src/schemas/extraction.ts'
import type { SearchRoleName } from '../../src/search/roles/rubric.ts'
import { SearchInputError } from './errors.ts'
import { finiteNumber, integer } from './flags.ts'
import type { BackendOptions } from './backend.ts'
import { type BackendChoice, SEARCH_ROLES } from './roles.ts'

type KnobKind = 'int' | 'number' | 'boolean' | 'enum' | 'nullable-int' | 'nullable-number'

/**
 * One `SearchConfig` knob as a flag: its kind from the zod type, its section and help from the schema's metadata.
 * @internal
 */
export interface KnobSpec extends KnobMeta {
  key: keyof SearchConfig
  kind: KnobKind
  choices?: readonly string[]
}

/**
 * The flag of one knob, read off the schema; a knob without `.meta(cli(…))` or of a type no flag can carry throws,
 * so a new knob cannot silently go without a flag.
 * @example knobOf('selection_strategy').choices // ['rank', 'tournament', 'top_k']
 */
function knobOf(key: keyof SearchConfig): KnobSpec {
  const field = SearchConfig.shape[key] as z.ZodDefault<z.ZodType>
  const meta = field.meta() as Partial<KnobMeta> | undefined
  if (!meta?.group || !meta.help) throw new Error(`SearchConfig.${key} has no CLI metadata (.meta(cli(group, help)))`)
  const base = { key, group: meta.group, help: meta.help }
  let inner = field.unwrap()
  const nullable = inner instanceof z.ZodNullable
  if (inner instanceof z.ZodNullable) inner = inner.unwrap() as z.ZodType
  if (inner instanceof z.ZodEnum) return { ...base, kind: 'enum', choices: inner.options as string[] }
  if (inner instanceof z.ZodBoolean) return { ...base, kind: 'boolean' }
  if (inner instanceof z.ZodNumber) {
    const kind = inner.isInt ? 'int' : 'number'
    return { ...base, kind: nullable ? `nullable-${kind}` : kind }
  }
  throw new Error(`SearchConfig.${key}: no flag kind for its type`)
}

const GROUP_ORDER = Object.keys(KNOB_GROUPS)

/**
 * Every `SearchConfig` knob as a flag, grouped as `--help` lists them (schema order within a group).
 * @internal
 */
export const CONFIG_KNOBS: readonly KnobSpec[] = (Object.keys(SearchConfig.shape) as Array<keyof SearchConfig>)
  .map(knobOf)
  .sort((a, b) => GROUP_ORDER.indexOf(a.group) - GROUP_ORDER.indexOf(b.group))

/**
 * The flag of a config knob.
 * @example flagOf('population_size') // '--population-size'
 * @internal
 */
export function flagOf(key: string): string {
  return `--${key.replace(/_/g, '-')}`
}

/** commander's attribute name of a flag: `--population-size` → `populationSize`. */
function attributeOf(key: string): string {
  return key.replace(/_([a-z])/g, (_match, letter: string) => letter.toUpperCase())
}

const nullable =
  (parse: (value: string) => number) =>
  (value: string): number | null =>
    ['auto', 'null', 'none'].includes(value.trim().toLowerCase()) ? null : parse(value)

/**
 * Adds one flag per `SearchConfig` knob (see {@link CONFIG_KNOBS}) to `command`, its default shown in the help. A
 * knob's flag has no commander default, so a `--config` file value is only overridden by a flag actually given.
 * @example addConfigKnobs(addSearchFlags(program.command('search')))
 */
export function addConfigKnobs(command: Command): Command {
  const defaults = SearchConfig.parse({})
  for (const knob of CONFIG_KNOBS) {
    const flag = flagOf(knob.key)
    const fallback = defaults[knob.key]
    const help = `[${KNOB_GROUPS[knob.group]}] ${knob.help} (default: ${fallback === null ? 'auto' : String(fallback)})`
    if (knob.kind === 'boolean') {
      command.addOption(new Option(flag, help))
      command.addOption(new Option(`--no-${flag.slice(2)}`, `[${KNOB_GROUPS[knob.group]}] turn ${flag} off`))
      continue
    }
    const valueName =
      knob.kind === 'enum' ? 'name' : knob.kind.startsWith('nullable') ? 'n|auto' : knob.kind === 'int' ? 'n' : 'x'
    const option = new Option(`${flag} <${valueName}>`, help)
    if (knob.kind === 'enum') option.choices(knob.choices!)
    else if (knob.kind === 'int') option.argParser(integer())
    else if (knob.kind === 'number') option.argParser(finiteNumber)
    else if (knob.kind === 'nullable-int') option.argParser(nullable(integer()))
    else option.argParser(nullable(finiteNumber))
    command.addOption(option)
  }
  return command
}

// ---------------------------------------------------------------------------------------------
// Reading the options

/** Everything a search run is told by its command line, checked and resolved (paths absolute). */
export interface SearchCliOptions extends Omit<BackendOptions, 'seed'> {
  /** Absolute path of the dataset. */
  dataset: string
  /** The dataset path as given (error messages name it so). */
  datasetArg: string
  datasetFormat?: 'json' | 'jsonl'
  output: string
  config: SearchConfig
  /** Where each knob's value came from: `flag`, `file` or `default`. */
  configSources: Record<string, 'flag' | 'file' | 'default'>
  configFile?: string
  resume?: string
  endpoints: string[]
  roleAttempts: number
  locale: 'en' | 'zh'
  gradeMax: number
  allowNa: boolean
  rubricVotes: number
  /** How the verifier grades (RunConfig.judging); travels into the exported artifact's runtime. */
  judging: 'grades' | 'verdicts'
  extraction: ContentExtraction
  presetRubrics?: string
  presetStrict: boolean
  /** null with --no-cache. */
  cacheDir: string | null
  checkpointDir: string
  keepCheckpoints: number
  abortAfterCalls?: number
  mockLatencyMs?: number
}

/**
 * Turns commander's parsed options into checked run options: reads `--config`, merges it under the flags,
 * validates the config (errors name the flag, or the file and key), checks flag combinations, and makes
 * paths absolute against `cwd`.
 * @example const options = await readSearchOptions(command.opts(), process.cwd())
 */
export async function readSearchOptions(
  raw: Record<string, unknown>,
  cwd: string = process.cwd(),
): Promise<SearchCliOptions> {
  const str = (name: string): string | undefined => (typeof raw[name] === 'string' ? (raw[name] as string) : undefined)
  const num = (name: string): number => raw[name] as number
  const abs = (value: string | undefined) => (value === undefined ? undefined : resolve(cwd, value))

  const configFile = abs(str('config'))
  const { config, sources } = await resolveSearchConfig(raw, configFile)

  const output = abs(str('output'))!
  if (!output.toLowerCase().endsWith('.json'))
    throw new SearchInputError(`--output: the search output is JSON; give a .json file, not "${str('output')}"`)
  const outputDir = resolve(output, '..')

  const temperature = num('temperature')
  if (temperature < 0 || temperature > 2)
    throw new SearchInputError(`--temperature: expected a number in [0, 2], got ${temperature}`)
  const mockNoise = num('mockNoise')
  if (mockNoise < 0 || mockNoise > 1)
    throw new SearchInputError(`--mock-noise: expected a share in [0, 1], got ${mockNoise}`)
  const gradeMax = num('gradeMax')
  if (gradeMax > 100) throw new SearchInputError(`--grade-max: at most 100, got ${gradeMax}`)
  const rubricVotes = num('rubricVotes')
  if (rubricVotes > 15) throw new SearchInputError(`--rubric-votes: at most 15, got ${rubricVotes}`)

  const extraction = readExtraction(raw)
  const models = readRoleModels(raw)
  const apiKeyEnv = str('apiKeyEnv')
  if (apiKeyEnv !== undefined && !/^[A-Z_][A-Z0-9_]*$/.test(apiKeyEnv))
    throw new SearchInputError(
      `--api-key-env: expected an environment variable name such as LLM_API_KEY, got "${apiKeyEnv}"`,
    )
  if (str('model')?.trim() === '') throw new SearchInputError('--model: give a model name')
  if (raw.presetStrict && !str('presetRubrics')) throw new SearchInputError('--preset-strict needs --preset-rubrics')

  return {
    dataset: abs(str('dataset'))!,
    datasetArg: str('dataset')!,
    ...(str('datasetFormat') ? { datasetFormat: str('datasetFormat') as 'json' | 'jsonl' } : {}),
    output,
    config,
    configSources: sources,
    ...(configFile ? { configFile } : {}),
    ...(str('resume') ? { resume: str('resume')! } : {}),
    backend: raw.backend as BackendChoice,
    endpoints: (raw.endpoint as string[] | undefined) ?? [],
    ...(str('endpointsFile') ? { endpointsFile: abs(str('endpointsFile'))! } : {}),
    ...(str('baseUrl') ? { baseUrl: str('baseUrl')! } : {}),
    ...(apiKeyEnv ? { apiKeyEnv } : {}),
    maxConcurrency: num('maxConcurrency'),
    ...(str('model') ? { model: str('model')! } : {}),
    models,
    temperature,
    maxTokens: num('maxTokens'),
    timeoutMs: num('timeoutMs'),
    maxAttempts: num('maxAttempts'),
    roleAttempts: num('roleAttempts'),
    mockNoise,
    locale: raw.locale as 'en' | 'zh',
    gradeMax,
    allowNa: raw.allowNa !== false,
    rubricVotes,
    judging: raw.judging === 'verdicts' ? 'verdicts' : 'grades',
    extraction,
    ...(str('presetRubrics') ? { presetRubrics: abs(str('presetRubrics'))! } : {}),
    presetStrict: raw.presetStrict === true,
    cacheDir: raw.cache === false ? null : (abs(str('cacheDir')) ?? resolve(outputDir, 'cache')),
    checkpointDir: abs(str('checkpointDir')) ?? resolve(outputDir, 'checkpoints'),
    keepCheckpoints: num('keepCheckpoints'),
    ...(typeof raw.abortAfterCalls === 'number' ? { abortAfterCalls: raw.abortAfterCalls } : {}),
    ...(typeof raw.mockLatencyMs === 'number' ? { mockLatencyMs: raw.mockLatencyMs } : {}),
  }
}

/**
 * The search config of a command line: defaults, then the `--config` file, then the flags given. Unknown keys in
 * the file and invalid values are errors naming the file and key, or the flag.
 * @example const { config, sources } = await resolveSearchConfig({ generations: 4 }, 'search.json')
 */
async function resolveSearchConfig(
  raw: Record<string, unknown>,
  configFile?: string,
): Promise<{ config: SearchConfig; sources: Record<string, 'flag' | 'file' | 'default'> }> {
  const fromFile = configFile ? await readConfigFile(configFile) : {}
  const input: Record<string, unknown> = { ...fromFile }
  const sources: Record<string, 'flag' | 'file' | 'default'> = {}
  for (const knob of CONFIG_KNOBS) {
    const value = raw[attributeOf(knob.key)]
    if (value !== undefined) {
      input[knob.key] = value
      sources[knob.key] = 'flag'
    } else sources[knob.key] = knob.key in fromFile ? 'file' : 'default'
  }
  try {
    return { config: parseSearchConfig(input as SearchConfigInput), sources }
  } catch (error) {
    const issues = (error as { details?: Array<{ field: string; message: string }> }).details
    if (!Array.isArray(issues)) throw error
    const problems = issues.map(({ field, message }) => {
      const key = field.split('.')[0] ?? ''
      if (sources[key] === 'flag') return `${flagOf(key)}: ${message}`
      if (sources[key] === 'file') return `${configFile}: ${key}: ${message}`
      return `${flagOf(key)} (default): ${message}`
    })
    throw new SearchInputError(problems.join('; '))
  }
}

async function readConfigFile(file: string): Promise<Record<string, unknown>> {
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (error) {
    throw new SearchInputError(
      `--config ${file}: cannot read the file (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
    )
  }
  let value: unknown
  try {
    const document = readJsonDocument(text, 'json', file)
    value = document.format === 'json' ? document.value : undefined
  } catch (error) {
    if (error instanceof DatasetError) throw new SearchInputError(`--config ${error.message}`)
    throw error
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new SearchInputError(`--config ${file}: expected a JSON object of search knobs`)
  const known = CONFIG_KNOBS.map((knob) => knob.key as string)
  const unknown = Object.keys(value).filter((key) => !known.includes(key))
  if (unknown.length > 0) throw new SearchInputError(`--config ${file}: ${unknownKeysMessage(unknown, known)}`)
  return value as Record<string, unknown>
}

/** The per-role models of `--model-<role>`; an empty name is refused. */
function readRoleModels(raw: Record<string, unknown>): Partial<Record<SearchRoleName, string>> {
  const models: Partial<Record<SearchRoleName, string>> = {}
  for (const role of SEARCH_ROLES) {
    const value = raw[`model${role[0]!.toUpperCase()}${role.slice(1)}`]
    if (typeof value !== 'string') continue
    if (value.trim() === '') throw new SearchInputError(`--model-${role}: give a model name`)
    models[role] = value
  }
  return models
}

function readExtraction(raw: Record<string, unknown>): ContentExtraction {
  const kind = raw.extraction === 'xml' ? 'tag' : (raw.extraction as 'identity' | 'tag' | 'regex')
  const tag = raw.extractionTag as string | undefined
  const pattern = raw.extractionPattern as string | undefined
  const join = raw.extractionJoin as string | undefined
  if (kind !== 'tag' && tag !== undefined) throw new SearchInputError('--extraction-tag needs --extraction tag')
  if (kind !== 'regex' && pattern !== undefined)
    throw new SearchInputError('--extraction-pattern needs --extraction regex')
  if (kind === 'identity' && join !== undefined)
    throw new SearchInputError('--extraction-join needs --extraction tag or regex')
  if (kind === 'regex' && pattern === undefined)
    throw new SearchInputError('--extraction regex needs --extraction-pattern <regex>')
  const prompt =
    kind === 'identity'
      ? { kind }
      : kind === 'tag'
        ? { kind, ...(tag === undefined ? {} : { tag }), ...(join === undefined ? {} : { join }) }
        : { kind, pattern, ...(join === undefined ? {} : { join }) }
  const parsed = ContentExtraction.safeParse({
    prompt,
    candidate: { kind: raw.candidateExtraction as 'answer' | 'identity' },
  })
  if (parsed.success) return parsed.data
  const flags: Record<string, string> = {
    'prompt.tag': '--extraction-tag',
    'prompt.pattern': '--extraction-pattern',
    'prompt.join': '--extraction-join',
    'candidate.kind': '--candidate-extraction',
  }
  throw new SearchInputError(
    parsed.error.issues.map((issue) => `${flags[issue.path.join('.')] ?? '--extraction'}: ${issue.message}`).join('; '),
  )
}
