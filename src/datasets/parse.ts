/**
 * Text → PreferenceDataset: finds the format (JSON or JSONL) and the shape (autosr prompts, LLMBar,
 * JudgeBench, chosen/rejected), reads every record, and reports every problem at once.
 */
import type { PreferenceDataset, PromptItem } from '../search/types.ts'
import { readAutosrPrompt } from './autosr.ts'
import { DatasetError } from './errors.ts'
import { describeType, isObject, IssueLog, type JsonObject, quoteId, rawId } from './fields.ts'
import { type DatasetFormat, readJsonDocument } from './json-text.ts'
import { type PairShape, pairIdField, pairPromptId, pairShapeOf, pairShapeTitle, readPair } from './pairwise.ts'

/** `autosr`: prompts with ranked or scored candidates; the others are pairwise benchmarks. */
export type DatasetShape = 'autosr' | PairShape

export interface ParseDatasetOptions {
  /** Force JSON or JSONL; by default the text decides. */
  format?: DatasetFormat
  /** The dataset's name (e.g. its file name): prefixes every error message. */
  name?: string
  /** Group of the prompts that have none, e.g. `natural` for LLMBar's Natural set (per-subset tables). */
  group?: string
}

/** A parsed dataset with what was detected about its text. */
export interface ParsedDataset {
  dataset: PreferenceDataset
  format: DatasetFormat
  shape: DatasetShape
}

const AUTOSR_TITLE = 'an autosr prompt {prompt_id, prompt, candidates}'
const EXPECTED =
  'expected {prompt_id, prompt, candidates} (autosr), {input, output_1, output_2, label} (LLMBar), {question, ' +
  'response_A, response_B, label} (JudgeBench) or {prompt, chosen, rejected}'

/**
 * Parses a preference dataset from text; throws a DatasetError that names the place of every problem.
 * Accepts `{prompts: [...]}` (autosr), a JSON array or JSON Lines of autosr prompts, LLMBar pairs,
 * JudgeBench pairs or `{prompt, chosen, rejected}` pairs. Ground truth always ends up in `label`.
 * @example
 * const dataset = parseDataset('{"question":"2+2?","response_A":"4","response_B":"5","label":"A>B"}\n', { name:
 * 'pairs.jsonl' }) dataset.prompts[0]?.candidates.map((c) => [c.candidate_id, c.label.rank]) // [['item-0000-a', 1],
 * ['item-0000-b', 2]]
 * @internal
 */
export function parseDataset(text: string, options: ParseDatasetOptions = {}): PreferenceDataset {
  return parseDatasetText(text, options).dataset
}

/**
 * Like parseDataset, and also says which format and shape the text had.
 * @example parseDatasetText('[{"input":"Hi","output_1":"a","output_2":"b","label":2}]') // { dataset: {…}, format:
 *   'json', shape: 'llmbar' }
 */
export function parseDatasetText(text: string, options: ParseDatasetOptions = {}): ParsedDataset {
  const document = readJsonDocument(text, options.format, options.name)
  const log = new IssueLog()
  const { records, forcedShape } = recordsOf(document, log)
  const first = firstShape(records)
  const shape = forcedShape ?? first?.shape ?? 'autosr'
  const prompts: PromptItem[] = []
  const firstPlaceOf = new Map<string, string>()

  for (const [index, { place, value }] of records.entries()) {
    if (!isObject(value)) {
      log.add(place, `must be an object, got ${describeType(value)}`)
      continue
    }
    const own = forcedShape ?? shapeOf(value)
    if (own === undefined) {
      log.add(place, `unrecognised item with fields ${fieldList(value)}: ${EXPECTED}`)
      continue
    }
    if (own !== shape) {
      log.add(place, `${titleOf(own)}, but ${first?.place} is ${titleOf(shape)}; use one shape per file`)
      continue
    }
    const promptId = own === 'autosr' ? rawId(value.prompt_id) : pairPromptId(value, own, index)
    const firstUse = promptId === undefined ? undefined : firstPlaceOf.get(promptId)
    if (promptId !== undefined && firstUse !== undefined)
      log.add(...duplicatePlace(value, own, place, promptId, firstUse))
    else if (promptId !== undefined) firstPlaceOf.set(promptId, place)
    const item = own === 'autosr' ? readAutosrPrompt(value, place, log) : readPair(value, own, index, place, log)
    if (item && firstUse === undefined)
      prompts.push(item.group === undefined && options.group !== undefined ? { ...item, group: options.group } : item)
  }
  if (records.length === 0 && log.empty) log.add(forcedShape ? 'prompts' : '', forcedShape ? 'no prompts' : 'no items')
  if (!log.empty) throw new DatasetError(log.issues, options.name)
  return { dataset: { prompts }, format: document.format, shape }
}

interface PlacedRecord {
  place: string
  value: unknown
}

function recordsOf(
  document: ReturnType<typeof readJsonDocument>,
  log: IssueLog,
): { records: PlacedRecord[]; forcedShape?: 'autosr' } {
  if (document.format === 'jsonl')
    return { records: document.records.map(({ line, value }) => ({ place: `line ${line}`, value })) }
  const value = document.value
  if (Array.isArray(value))
    return { records: value.map((item: unknown, index) => ({ place: `items[${index}]`, value: item })) }
  if (isObject(value) && 'prompts' in value) {
    if (Array.isArray(value.prompts))
      return {
        records: value.prompts.map((item: unknown, index) => ({ place: `prompts[${index}]`, value: item })),
        forcedShape: 'autosr',
      }
    log.add('prompts', `must be an array, got ${describeType(value.prompts)}`)
    return { records: [], forcedShape: 'autosr' }
  }
  if (isObject(value) && shapeOf(value) !== undefined) return { records: [{ place: 'items[0]', value }] }
  log.add(
    '',
    `expected an object with "prompts", an array of items, or JSON Lines; got ` +
      `${isObject(value) ? `an object with fields ${fieldList(value)}` : describeType(value)}`,
  )
  return { records: [] }
}

function shapeOf(record: JsonObject): DatasetShape | undefined {
  return 'candidates' in record ? 'autosr' : pairShapeOf(record)
}

function firstShape(records: PlacedRecord[]): { shape: DatasetShape; place: string } | undefined {
  for (const { place, value } of records) {
    const shape = isObject(value) ? shapeOf(value) : undefined
    if (shape) return { shape, place }
  }
  return undefined
}

function titleOf(shape: DatasetShape): string {
  return shape === 'autosr' ? AUTOSR_TITLE : pairShapeTitle(shape)
}

function fieldList(record: JsonObject): string {
  const keys = Object.keys(record)
  if (keys.length === 0) return '{}'
  return `{${keys.slice(0, 8).join(', ')}${keys.length > 8 ? ', …' : ''}}`
}

function duplicatePlace(
  record: JsonObject,
  shape: DatasetShape,
  place: string,
  promptId: string,
  first: string,
): [string, string] {
  const idField = shape === 'autosr' ? 'prompt_id' : pairIdField(record, shape)
  if (idField === undefined)
    return [place, `generated prompt_id ${quoteId(promptId)} is already used by ${first}; give every item an id`]
  return [`${place} (${idField} ${quoteId(promptId)}).${idField}`, `duplicate of ${first}`]
}
