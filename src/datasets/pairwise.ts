/**
 * Pairwise benchmark records (peers §3) as two-candidate PromptItems ranked 1 and 2:
 * LLMBar `{input, output_1, output_2, label: 1|2}`, JudgeBench `{pair_id, question, response_A,
 * response_B, label: "A>B"|"B>A", source, response_model}` and RewardBench-style `{prompt, chosen, rejected}`.
 */
import { fnv1a, mix32 } from '../hash/index.ts'
import type { Candidate, PromptItem } from '../search/types.ts'
import {
  describeType,
  type IssueLog,
  type JsonObject,
  quoteId,
  rawId,
  readId,
  readOptionalText,
  readReference,
  readText,
  restOf,
} from './fields.ts'
import { readImageRefs, withImages } from './images.ts'

const PAIR_SHAPES = ['llmbar', 'judgebench', 'chosen_rejected'] as const
export type PairShape = (typeof PAIR_SHAPES)[number]

type Winner = 'a' | 'b'

interface PairSpec {
  /** How the shape is named in messages. */
  title: string
  prompt: string
  a: string
  b: string
  /** Id fields, first present wins. */
  ids: readonly string[]
  /** Fields naming each candidate's source model, if the benchmark has them (one field: both candidates). */
  sources: readonly [string, string] | readonly [string] | readonly []
  label?: string
  /** Which field holds the better answer; undefined after logging a bad or missing label. */
  winner(record: JsonObject, place: string, log: IssueLog): Winner | undefined
}

/** Fields that may name a pair's subset; the first present becomes the PromptItem's `group`. */
const GROUP_FIELDS = ['group', 'subset', 'source'] as const

const SPECS: Record<PairShape, PairSpec> = {
  llmbar: {
    title: 'an LLMBar pair {input, output_1, output_2, label}',
    prompt: 'input',
    a: 'output_1',
    b: 'output_2',
    ids: ['id'],
    sources: [],
    label: 'label',
    winner(record, place, log) {
      const label = record.label
      if (label === undefined || label === null) return void log.add(`${place}.label`, 'required')
      if (label === 1 || label === '1') return 'a'
      if (label === 2 || label === '2') return 'b'
      return void log.add(
        `${place}.label`,
        `must be 1 or 2 (the better output), got ` +
          `${typeof label === 'string' || typeof label === 'number' ? JSON.stringify(label) : describeType(label)}`,
      )
    },
  },
  judgebench: {
    title: 'a JudgeBench pair {question, response_A, response_B, label}',
    prompt: 'question',
    a: 'response_A',
    b: 'response_B',
    ids: ['pair_id', 'id'],
    sources: ['response_model'],
    label: 'label',
    winner(record, place, log) {
      const label = record.label
      if (label === undefined || label === null) return void log.add(`${place}.label`, 'required')
      const text = typeof label === 'string' ? label.trim() : undefined
      if (text === 'A>B') return 'a'
      if (text === 'B>A') return 'b'
      return void log.add(
        `${place}.label`,
        `must be "A>B" or "B>A", got ${typeof label === 'string' ? JSON.stringify(label) : describeType(label)}`,
      )
    },
  },
  chosen_rejected: {
    title: 'a preference pair {prompt, chosen, rejected}',
    prompt: 'prompt',
    a: 'chosen',
    b: 'rejected',
    ids: ['id', 'pair_id'],
    sources: ['chosen_model', 'rejected_model'],
    winner: () => 'a',
  },
}

/**
 * The pairwise shape a record has, from its distinctive fields; undefined for anything else.
 * @example pairShapeOf({ question: 'Q', response_A: 'x', response_B: 'y', label: 'A>B' }) // 'judgebench'
 */
export function pairShapeOf(record: JsonObject): PairShape | undefined {
  if ('output_1' in record || 'output_2' in record) return 'llmbar'
  if ('response_A' in record || 'response_B' in record) return 'judgebench'
  if ('chosen' in record || 'rejected' in record) return 'chosen_rejected'
  return undefined
}

/**
 * How a pairwise shape is named in messages.
 * @example pairShapeTitle('llmbar') // 'an LLMBar pair {input, output_1, output_2, label}'
 */
export function pairShapeTitle(shape: PairShape): string {
  return SPECS[shape].title
}

/**
 * The prompt id of the record at `index` that has no id of its own: stable for a given file, sorted like the file.
 * @example generatedPromptId(7) // 'item-0007'
 */
function generatedPromptId(index: number): string {
  return `item-${String(index).padStart(4, '0')}`
}

/**
 * The field holding a pairwise record's own id, if it has one (`pair_id` before `id` for JudgeBench).
 * @example pairIdField({ pair_id: 'x', question: 'Q' }, 'judgebench') // 'pair_id'
 */
export function pairIdField(record: JsonObject, shape: PairShape): string | undefined {
  return SPECS[shape].ids.find((field) => record[field] !== undefined && record[field] !== null)
}

/**
 * The prompt id a pairwise record gets: its own id when usable, else the generated one for its index.
 * @example pairPromptId({ input: 'Hi' }, 'llmbar', 3) // 'item-0003'
 */
export function pairPromptId(record: JsonObject, shape: PairShape, index: number): string | undefined {
  const field = pairIdField(record, shape)
  return field === undefined ? generatedPromptId(index) : rawId(record[field])
}

/**
 * A pairwise record as a PromptItem with candidates `<id>-a` and `<id>-b` ranked 1 and 2; problems go to `log`.
 * For LLMBar and JudgeBench, `-a`/`-b` are the benchmark's first/second answer. For `{prompt, chosen,
 * rejected}` the order is a stable coin flip on the prompt id, so neither an id nor a position tells
 * which answer was chosen (autosr §8.2). The item's other fields are kept in the PromptItem's metadata.
 * @example readPair({ input: 'Say hi', output_1: 'hi', output_2: 'bye', label: 1 }, 'llmbar', 0, 'items[0]', log)
 * // { prompt_id: 'item-0000', prompt: 'Say hi', candidates: [{ candidate_id: 'item-0000-a', text: 'hi', label: { rank:
 * 1 }, … }, { candidate_id: 'item-0000-b', text: 'bye', label: { rank: 2 }, … }], metadata: {} }
 */
export function readPair(
  record: JsonObject,
  shape: PairShape,
  index: number,
  place: string,
  log: IssueLog,
): PromptItem | undefined {
  const spec = SPECS[shape]
  const before = log.issues.length
  const idField = pairIdField(record, shape)
  const ownId = idField === undefined ? undefined : readId(record, idField, place, log)
  const promptId = ownId ?? generatedPromptId(index)
  const at = ownId === undefined ? place : `${place} (${idField} ${quoteId(ownId)})`
  const prompt = readText(record, spec.prompt, at, log)
  const first = readText(record, spec.a, at, log, true)
  const second = readText(record, spec.b, at, log, true)
  const winner = spec.winner(record, at, log)
  const groupField = GROUP_FIELDS.find((field) => record[field] !== undefined && record[field] !== null)
  const group = groupField === undefined ? undefined : readOptionalText(record, groupField, at, log)
  const reference = readReference(record, at, log)
  const sources = spec.sources.map((field) => readOptionalText(record, field, at, log))
  // Images of the prompt (`images` beside the fields) are checked here; they stay in the item's metadata.
  const images = readImageRefs(record.images, `${at}.images`, log)
  if (
    log.issues.length > before ||
    prompt === undefined ||
    first === undefined ||
    second === undefined ||
    winner === undefined
  )
    return undefined

  const sourceA = sources[0] ?? 'unknown'
  const sourceB = (spec.sources.length === 2 ? sources[1] : sources[0]) ?? 'unknown'
  let answers: [Answer, Answer] = [
    { text: first, source: sourceA, rank: winner === 'a' ? 1 : 2 },
    { text: second, source: sourceB, rank: winner === 'b' ? 1 : 2 },
  ]
  if (shape === 'chosen_rejected' && (mix32(fnv1a(promptId)) & 1) === 1) answers = [answers[1], answers[0]]
  const candidates = answers.map(
    (answer, position): Candidate => ({
      candidate_id: `${promptId}-${position === 0 ? 'a' : 'b'}`,
      text: answer.text,
      source: answer.source,
      label: { rank: answer.rank },
      metadata: {},
    }),
  )
  const used = [
    spec.prompt,
    spec.a,
    spec.b,
    ...spec.sources,
    ...(spec.label ? [spec.label] : []),
    ...(idField ? [idField] : []),
    ...(groupField ? [groupField] : []),
    'reference',
  ]
  return {
    prompt_id: promptId,
    prompt,
    candidates,
    ...(group === undefined ? {} : { group }),
    ...(reference === undefined ? {} : { reference }),
    metadata: withImages(restOf(record, [...used, 'images']), images ?? []),
  }
}

interface Answer {
  text: string
  source: string
  rank: number
}
