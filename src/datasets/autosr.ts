/**
 * The autosr prompt shape (§1.1): `{prompt_id, prompt, candidates: [{candidate_id, text, source?,
 * metadata: {rank? | quality?, …}, images?}], metadata?, group?, images?}` (`images`: see images.ts). Ground truth
 * moves out of `metadata` into `label`, so nothing that reaches an LLM can carry it (autosr §8.2).
 */
import type { Candidate, CandidateLabel, PromptItem } from '../search/types.ts'
import {
  describeType,
  isObject,
  type IssueLog,
  type JsonObject,
  quoteId,
  rawId,
  readId,
  readObject,
  readOptionalText,
  readReference,
  readText,
  restOf,
} from './fields.ts'
import { recordImages, withImages } from './images.ts'

/** Candidate fields that are ground truth, wherever they are written. */
const LABEL_FIELDS = ['rank', 'quality'] as const

/**
 * One autosr prompt record as a PromptItem; problems go to `log` (then the result is undefined).
 * @example readAutosrPrompt({ prompt_id: 'p1', prompt: 'Q', candidates: [{ candidate_id: 'a', text: 'x', metadata: {
 *   rank: 1 } }, { candidate_id: 'b', text: 'y', metadata: { rank: 2 } }] }, 'prompts[0]', log)
 * // { prompt_id: 'p1', prompt: 'Q', candidates: [{ candidate_id: 'a', text: 'x', source: 'unknown', label: { rank: 1
 * }, metadata: {} }, …], metadata: {} }
 */
export function readAutosrPrompt(record: JsonObject, place: string, log: IssueLog): PromptItem | undefined {
  const before = log.issues.length
  const promptId = readId(record, 'prompt_id', place, log)
  const at = promptId === undefined ? place : `${place} (prompt_id ${quoteId(promptId)})`
  const prompt = readText(record, 'prompt', at, log)
  const group = readOptionalText(record, 'group', at, log)
  const reference = readReference(record, at, log)
  const metadata = readObject(record, 'metadata', at, log)
  const images = recordImages(record, metadata, at, log)
  const candidates = readCandidates(record, at, log)
  if (
    log.issues.length > before ||
    promptId === undefined ||
    prompt === undefined ||
    candidates === undefined ||
    images === undefined
  )
    return undefined
  return {
    prompt_id: promptId,
    prompt,
    candidates,
    ...(group === undefined ? {} : { group }),
    ...(reference === undefined ? {} : { reference }),
    metadata: withImages(metadata, images),
  }
}

function readCandidates(record: JsonObject, place: string, log: IssueLog): Candidate[] | undefined {
  const raw = record.candidates
  if (raw === undefined || raw === null) return void log.add(`${place}.candidates`, 'required')
  if (!Array.isArray(raw)) return void log.add(`${place}.candidates`, `must be an array, got ${describeType(raw)}`)
  if (raw.length < 2) log.add(`${place}.candidates`, `needs at least 2 candidates, got ${raw.length}`)
  const firstSeen = new Map<string, number>()
  const candidates: Candidate[] = []
  for (const [index, value] of raw.entries()) {
    const at = `${place}.candidates[${index}]`
    if (!isObject(value)) {
      log.add(at, `must be an object, got ${describeType(value)}`)
      continue
    }
    const id = rawId(value.candidate_id)
    const first = id === undefined ? undefined : firstSeen.get(id)
    if (id !== undefined && first !== undefined)
      log.add(`${at} (candidate_id ${quoteId(id)}).candidate_id`, `duplicate of candidates[${first}]`)
    else if (id !== undefined) firstSeen.set(id, index)
    const candidate = readCandidate(value, at, log)
    if (candidate && first === undefined) candidates.push(candidate)
  }
  return candidates
}

function readCandidate(record: JsonObject, place: string, log: IssueLog): Candidate | undefined {
  const before = log.issues.length
  const candidateId = readId(record, 'candidate_id', place, log)
  const at = candidateId === undefined ? place : `${place} (candidate_id ${quoteId(candidateId)})`
  const text = readText(record, 'text', at, log, true)
  const source = readOptionalText(record, 'source', at, log) ?? 'unknown'
  const metadata = readObject(record, 'metadata', at, log)
  const label = readLabel(record, metadata, at, log)
  const images = recordImages(record, metadata, at, log)
  if (log.issues.length > before || candidateId === undefined || text === undefined || images === undefined)
    return undefined
  return {
    candidate_id: candidateId,
    text,
    source,
    label,
    metadata: withImages(restOf(metadata, LABEL_FIELDS), images),
  }
}

/** `rank`/`quality` from `metadata` (autosr) or `label` (this project's own shape); both may be given if they agree. */
function readLabel(record: JsonObject, metadata: JsonObject, place: string, log: IssueLog): CandidateLabel {
  const explicit = readObject(record, 'label', place, log)
  const label: CandidateLabel = {}
  for (const field of LABEL_FIELDS) {
    const fromMetadata = readLabelValue(field, metadata[field], `${place}.metadata.${field}`, log)
    const fromLabel = readLabelValue(field, explicit[field], `${place}.label.${field}`, log)
    if (fromMetadata !== undefined && fromLabel !== undefined && fromMetadata !== fromLabel) {
      log.add(`${place}.label.${field}`, `${fromLabel} disagrees with metadata.${field} ${fromMetadata}`)
    }
    const value = fromLabel ?? fromMetadata
    if (value !== undefined) label[field] = value
  }
  return label
}

function readLabelValue(
  field: (typeof LABEL_FIELDS)[number],
  value: unknown,
  place: string,
  log: IssueLog,
): number | undefined {
  if (value === undefined || value === null) return undefined
  if (field === 'rank' && !(typeof value === 'number' && Number.isInteger(value) && value >= 1)) {
    return void log.add(
      place,
      `must be a positive integer (1 = best), got ${typeof value === 'number' ? value : describeType(value)}`,
    )
  }
  if (field === 'quality' && !(typeof value === 'number' && Number.isFinite(value))) {
    return void log.add(place, `must be a finite number (higher is better), got ${describeType(value)}`)
  }
  return value as number
}
