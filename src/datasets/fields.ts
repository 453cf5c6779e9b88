/**
 * Reading fields of untrusted records: each reader either returns a clean value or logs an issue at the field's place.
 */
import type { DatasetIssue } from './errors.ts'

export type JsonObject = Record<string, unknown>

/**
 * Collects the issues found while reading a dataset; keeps at most `limit` of them.
 * @example const log = new IssueLog(); log.add('prompts[0].prompt', 'required'); log.empty // false
 */
export class IssueLog {
  readonly issues: DatasetIssue[] = []
  constructor(private readonly limit = 200) {}
  add(place: string, reason: string): void {
    if (this.issues.length < this.limit) this.issues.push({ place, reason })
  }
  get empty(): boolean {
    return this.issues.length === 0
  }
}

/**
 * True for a plain JSON object (not an array, not null).
 * @example isObject({}) // true; isObject([]) // false
 */
export function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/**
 * A JSON value's kind, for messages.
 * @example describeType([]) // 'an array'
 */
export function describeType(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  if (typeof value === 'object') return 'an object'
  if (typeof value === 'string') return value.trim() === '' ? 'a blank string' : 'a string'
  return `a ${typeof value}`
}

/**
 * An id as it appears in messages: quoted, and cut when long.
 * @example quoteId('p_4') // '"p_4"'
 */
export function quoteId(id: string): string {
  return JSON.stringify(id.length > 60 ? `${id.slice(0, 57)}…` : id)
}

/**
 * An id's value if it is a usable one (non-blank string or finite number), without logging anything.
 * @example rawId(7) // '7'; rawId('  ') // undefined
 */
export function rawId(value: unknown): string | undefined {
  if (typeof value === 'number' && Number.isFinite(value)) return String(value)
  if (typeof value === 'string' && value.trim() !== '') return value
  return undefined
}

/**
 * A required id: a non-blank string, or a finite number (stringified, as autosr does).
 * @example readId({ pair_id: 7 }, 'pair_id', 'items[0]', log) // '7'
 */
export function readId(record: JsonObject, key: string, place: string, log: IssueLog): string | undefined {
  const value = record[key]
  if (value === undefined || value === null) return void log.add(`${place}.${key}`, 'required')
  if (typeof value === 'number' && Number.isFinite(value)) return String(value)
  if (typeof value === 'string' && value.trim() !== '') return value
  log.add(
    `${place}.${key}`,
    typeof value === 'string' ? 'must not be blank' : `must be a string or a number, got ${describeType(value)}`,
  )
  return undefined
}

/**
 * A required string; blank strings are refused unless `allowBlank` (a candidate's text may be empty).
 * @example readText({ prompt: 'Hi' }, 'prompt', 'prompts[0]', log) // 'Hi'
 */
export function readText(
  record: JsonObject,
  key: string,
  place: string,
  log: IssueLog,
  allowBlank = false,
): string | undefined {
  const value = record[key]
  if (value === undefined || value === null) return void log.add(`${place}.${key}`, 'required')
  if (typeof value !== 'string') return void log.add(`${place}.${key}`, `must be a string, got ${describeType(value)}`)
  if (!allowBlank && value.trim() === '') return void log.add(`${place}.${key}`, 'must not be blank')
  return value
}

/**
 * An optional non-blank string: undefined when absent or null.
 * @example readOptionalText({ source: 'strong' }, 'source', 'prompts[0].candidates[0]', log) // 'strong'
 */
export function readOptionalText(record: JsonObject, key: string, place: string, log: IssueLog): string | undefined {
  if (record[key] === undefined || record[key] === null) return undefined
  return readText(record, key, place, log)
}

/**
 * An optional reference answer (`reference`): a non-blank string, or a finite number as its decimal text.
 * @example readReference({ reference: 18 }, 'items[0]', log) // '18'
 */
export function readReference(record: JsonObject, place: string, log: IssueLog): string | undefined {
  const value = record.reference
  if (typeof value === 'number' && Number.isFinite(value)) return String(value)
  return readOptionalText(record, 'reference', place, log)
}

/**
 * An optional object (a `metadata` field): `{}` when absent or null.
 * @example readObject({ metadata: { rank: 1 } }, 'metadata', 'prompts[0]', log) // { rank: 1 }
 */
export function readObject(record: JsonObject, key: string, place: string, log: IssueLog): JsonObject {
  const value = record[key]
  if (value === undefined || value === null) return {}
  if (isObject(value)) return value
  log.add(`${place}.${key}`, `must be an object, got ${describeType(value)}`)
  return {}
}

/**
 * The entries of `record` whose keys are not in `used`.
 * @example restOf({ a: 1, b: 2 }, ['a']) // { b: 2 }
 */
export function restOf(record: JsonObject, used: readonly string[]): JsonObject {
  return Object.fromEntries(Object.entries(record).filter(([key]) => !used.includes(key)))
}
