/**
 * JSON and JSON Lines from text, with syntax errors that say where they are. `JSON.parse` does the
 * work; on failure a small scanner finds the offending line and column (engines word and place their
 * own messages differently, and some give no position at all).
 */
import { DatasetError, type DatasetIssue } from './errors.ts'

export type DatasetFormat = 'json' | 'jsonl'

/** A parsed document: one JSON value, or one value per non-blank line with its 1-based line number. */
export type JsonDocument =
  | { format: 'json'; value: unknown }
  | { format: 'jsonl'; records: { line: number; value: unknown }[] }

/**
 * Parses `text` as JSON or JSONL. Without `format`, a text that is one JSON value is JSON, and a text
 * whose first non-blank line is a JSON object on its own is JSONL. Throws a DatasetError naming the line.
 * @example
 * readJsonDocument('{"a":1}\n{"a":2}\n')
 * // { format: 'jsonl', records: [{ line: 1, value: { a: 1 } }, { line: 2, value: { a: 2 } }] }
 */
export function readJsonDocument(text: string, format?: DatasetFormat, name?: string): JsonDocument {
  const body = text.startsWith('\uFEFF') ? text.slice(1) : text
  if (body.trim() === '') throw new DatasetError([{ place: '', reason: 'the file is empty' }], name)
  if (format === 'jsonl') return readJsonLines(body, name)
  if (format === 'json') return { format: 'json', value: parseJsonOrThrow(body, name) }
  try {
    return { format: 'json', value: JSON.parse(body) as unknown }
  } catch {
    if (firstLineIsObject(body)) return readJsonLines(body, name)
    return { format: 'json', value: parseJsonOrThrow(body, name) }
  }
}

function readJsonLines(body: string, name?: string): JsonDocument {
  const records: { line: number; value: unknown }[] = []
  const issues: DatasetIssue[] = []
  body.split('\n').forEach((raw, index) => {
    const line = raw.trim()
    if (line === '') return
    try {
      records.push({ line: index + 1, value: JSON.parse(line) as unknown })
    } catch {
      const fault = locateJsonError(line)
      issues.push({
        place: `line ${index + 1}`,
        reason: `not valid JSON: ${fault.reason} at column ${fault.column + (raw.length - raw.trimStart().length)}`,
      })
    }
  })
  if (issues.length > 0) throw new DatasetError(issues, name)
  return { format: 'jsonl', records }
}

function parseJsonOrThrow(body: string, name?: string): unknown {
  try {
    return JSON.parse(body) as unknown
  } catch {
    const fault = locateJsonError(body)
    throw new DatasetError(
      [{ place: `line ${fault.line}`, reason: `not valid JSON: ${fault.reason} at column ${fault.column}` }],
      name,
    )
  }
}

function firstLineIsObject(body: string): boolean {
  const first =
    body
      .split('\n')
      .find((line) => line.trim() !== '')
      ?.trim() ?? ''
  if (!first.startsWith('{')) return false
  try {
    const value: unknown = JSON.parse(first)
    return typeof value === 'object' && value !== null && !Array.isArray(value)
  } catch {
    return false
  }
}

/** Where and why a JSON text is invalid: 1-based line and column of the first offending character. */
export interface JsonFault {
  line: number
  column: number
  reason: string
}

class JsonSyntaxFault extends Error {
  constructor(
    readonly offset: number,
    readonly reason: string,
  ) {
    super(reason)
  }
}

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y
const WHITESPACE = /[ \t\n\r]*/y

/**
 * The first syntax error in a JSON text (call it only once `JSON.parse` has failed).
 * @example
 * locateJsonError('{"a": 1,\n "b" 2}')
 * // { line: 2, column: 6, reason: "expected ':' after a property name, found '2'" }
 */
export function locateJsonError(text: string): JsonFault {
  const scanner = new JsonScanner(text)
  let offset = text.length
  let reason = 'not valid JSON'
  try {
    scanner.document()
  } catch (error) {
    if (!(error instanceof JsonSyntaxFault)) throw error
    offset = error.offset
    reason = error.reason
  }
  const before = text.slice(0, offset)
  const line = before.split('\n').length
  return { line, column: offset - (before.lastIndexOf('\n') + 1) + 1, reason }
}

/** A recursive-descent JSON reader that only checks syntax and throws a JsonSyntaxFault at the first error. */
class JsonScanner {
  private at = 0

  constructor(private readonly text: string) {}

  /** One JSON value and nothing after it but whitespace. */
  document(): void {
    this.value()
    this.skipWhitespace()
    if (this.at < this.text.length) this.fail(`unexpected ${this.found()} after the JSON value`)
  }

  private found(): string {
    return this.at >= this.text.length ? 'the end of the text' : `'${this.text[this.at]}'`
  }

  private fail(reason: string): never {
    throw new JsonSyntaxFault(this.at, reason)
  }

  private skipWhitespace(): void {
    WHITESPACE.lastIndex = this.at
    WHITESPACE.exec(this.text)
    this.at = WHITESPACE.lastIndex
  }

  private value(): void {
    this.skipWhitespace()
    const char = this.text[this.at]
    if (char === '{') this.object()
    else if (char === '[') this.array()
    else if (char === '"') this.string()
    else this.literalOrNumber()
  }

  private string(): void {
    const { text } = this
    this.at++ // opening quote
    for (;;) {
      if (this.at >= text.length) this.fail('unterminated string')
      const char = text.charCodeAt(this.at)
      if (char === 0x22) {
        this.at++
        return
      }
      if (char < 0x20) this.fail('unescaped control character in a string')
      if (char === 0x5c) this.escape()
      else this.at++
    }
  }

  private escape(): void {
    const escaped = this.text[this.at + 1]
    if (escaped === undefined) this.fail('unterminated string')
    else if (escaped === 'u') {
      if (!/^[0-9a-fA-F]{4}$/.test(this.text.slice(this.at + 2, this.at + 6))) this.fail('bad \\u escape in a string')
      this.at += 6
    } else if ('"\\/bfnrt'.includes(escaped)) this.at += 2
    else this.fail(`bad escape '\\${escaped}' in a string`)
  }

  private literalOrNumber(): void {
    for (const literal of ['true', 'false', 'null']) {
      if (this.text.startsWith(literal, this.at)) {
        this.at += literal.length
        return
      }
    }
    NUMBER.lastIndex = this.at
    if (NUMBER.exec(this.text)) {
      this.at = NUMBER.lastIndex
      return
    }
    this.fail(
      this.at >= this.text.length
        ? 'unexpected end of the text, expected a value'
        : `unexpected ${this.found()}, expected a value`,
    )
  }

  private object(): void {
    this.at++
    this.skipWhitespace()
    if (this.text[this.at] === '}') {
      this.at++
      return
    }
    for (;;) {
      this.skipWhitespace()
      if (this.text[this.at] !== '"') this.fail(`expected a property name in double quotes, found ${this.found()}`)
      this.string()
      this.skipWhitespace()
      if (this.text[this.at] !== ':') this.fail(`expected ':' after a property name, found ${this.found()}`)
      this.at++
      this.value()
      this.skipWhitespace()
      if (this.text[this.at] === ',') this.at++
      else if (this.text[this.at] === '}') {
        this.at++
        return
      } else this.fail(`expected ',' or '}' after a property value, found ${this.found()}`)
    }
  }

  private array(): void {
    this.at++
    this.skipWhitespace()
    if (this.text[this.at] === ']') {
      this.at++
      return
    }
    for (;;) {
      this.value()
      this.skipWhitespace()
      if (this.text[this.at] === ',') this.at++
      else if (this.text[this.at] === ']') {
        this.at++
        return
      } else this.fail(`expected ',' or ']' after an array element, found ${this.found()}`)
    }
  }
}
