/**
 * `<tag …>…</tag>` segments found in one pass: what `/<tag(?:\s[^>]*)?>([\s\S]*?)<\/tag\s*>/gi` finds with
 * `matchAll`, without its cost. JavaScript's engine tries every `<tag` as a start and scans to the end of the text
 * for a closing tag each time, so 200 KB of `<answer>` (or of `<think `) took seconds. Here the text is scanned
 * forward once: an opening tag ends at the first `>` after it, its segment at the first closing tag after that, and
 * once no closing tag follows an opening one, none follows a later one either.
 */

/** One segment: the whole `<tag>…</tag>` span and its content, as UTF-16 offsets. */
export interface TagSegment {
  start: number
  end: number
  contentStart: number
  contentEnd: number
}

/** The code units JavaScript's `\s` matches. */
function isSpace(unit: number): boolean {
  return (
    (unit >= 9 && unit <= 13) ||
    unit === 32 ||
    unit === 0xa0 ||
    unit === 0x1680 ||
    (unit >= 0x2000 && unit <= 0x200a) ||
    unit === 0x2028 ||
    unit === 0x2029 ||
    unit === 0x202f ||
    unit === 0x205f ||
    unit === 0x3000 ||
    unit === 0xfeff
  )
}

/** `text` with ASCII letters lowered, the same length: the `i` flag folds nothing else into an ASCII tag name. */
function asciiLower(text: string): string {
  return text.replace(/[A-Z]+/g, (letters) => letters.toLowerCase())
}

/**
 * A forward-only reader of one text's tags: each query starts at or after the previous one's start, so the scans of
 * all queries together cover the text about once.
 */
class TagScanner {
  readonly #lower: string
  readonly #opening: string
  readonly #closing: string
  /** The first `>` at or after `#gtFrom` (-1: none), so a run of openers without one is not rescanned. */
  #gt = -2
  #gtFrom = 0

  constructor(
    private readonly text: string,
    tag: string,
  ) {
    this.#lower = asciiLower(text)
    this.#opening = `<${tag.toLowerCase()}`
    this.#closing = `</${tag.toLowerCase()}`
  }

  /** The first `>` at or after `from`, or -1. */
  #nextGt(from: number): number {
    if (this.#gtFrom <= from && (this.#gt === -1 || this.#gt >= from)) return this.#gt
    this.#gtFrom = from
    this.#gt = this.text.indexOf('>', from)
    return this.#gt
  }

  /** The end of the opening tag that starts at `at`, or -1 when none starts there; undefined when none can follow. */
  #openingEnd(at: number): number | undefined {
    const after = at + this.#opening.length
    if (this.text.charCodeAt(after) === 62) return after + 1
    if (!isSpace(this.text.charCodeAt(after))) return -1
    const gt = this.#nextGt(after + 1)
    return gt < 0 ? undefined : gt + 1
  }

  /** The first closing tag at or after `from`: its start and end; undefined when there is none. */
  closing(from: number): { start: number; end: number } | undefined {
    for (let at = this.#lower.indexOf(this.#closing, from); at >= 0; at = this.#lower.indexOf(this.#closing, at + 1)) {
      let end = at + this.#closing.length
      while (isSpace(this.text.charCodeAt(end))) end++
      if (this.text.charCodeAt(end) === 62) return { start: at, end: end + 1 }
    }
    return undefined
  }

  /** The first whole segment at or after `from`; undefined when there is none. */
  segment(from: number): TagSegment | undefined {
    for (let at = this.#lower.indexOf(this.#opening, from); at >= 0; at = this.#lower.indexOf(this.#opening, at + 1)) {
      const contentStart = this.#openingEnd(at)
      if (contentStart === undefined) return undefined
      if (contentStart < 0) continue
      const closing = this.closing(contentStart)
      if (!closing) return undefined
      return { start: at, end: closing.end, contentStart, contentEnd: closing.start }
    }
    return undefined
  }
}

/**
 * Every `<tag …>…</tag>` segment of `text` (tag name case-insensitive, non-greedy), in order.
 * @example tagSegments('a <q>x</q> <Q k=1>y</q >', 'q').map((s) => s.contentStart) // [5, 16]
 */
export function tagSegments(text: string, tag: string): TagSegment[] {
  const scanner = new TagScanner(text, tag)
  const segments: TagSegment[] = []
  for (let found = scanner.segment(0); found; found = scanner.segment(found.end)) segments.push(found)
  return segments
}

/**
 * Where the last `</tag>` (with optional spaces before its `>`) of `text` ends, or -1 when it has none.
 * @example lastClosingTagEnd('a</think> b</think >c', 'think') // 20
 */
export function lastClosingTagEnd(text: string, tag: string): number {
  const scanner = new TagScanner(text, tag)
  let last = -1
  for (let found = scanner.closing(0); found; found = scanner.closing(found.end)) last = found.end
  return last
}
