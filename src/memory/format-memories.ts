import type { MemoryDocument } from '../schemas/memory.ts'

export interface FormatMemoriesOptions {
  /** The whole block's length bound, in characters. */
  maxChars?: number
  /** The longest text one document may show; longer texts are cut with `…`. */
  maxDocumentChars?: number
}

/** A text cut to fewer characters than this is not worth showing: it and the rest are reported as omitted. */
const MIN_TEXT_CHARS = 120
const OMITTED_NOTE_CHARS = 48

/**
 * The memory block an updater prompt embeds: static documents (marked `recent`) then dynamic ones (`retrieved`),
 * each as `<memory …>text</memory>` with its kind, step and instance, within `maxChars` (default 12000) in total.
 * Texts are data: a `</memory` inside one is defused so it cannot close its block. Empty input gives ''.
 * @example const block = formatMemoriesForPrompt(memories.static, memories.dynamic, { maxChars: 8000 })
 */
export function formatMemoriesForPrompt(
  staticDocs: MemoryDocument[],
  dynamicDocs: MemoryDocument[],
  options: FormatMemoriesOptions = {},
): string {
  const { maxChars = 12_000, maxDocumentChars = 2_000 } = options
  const seen = new Set<string>()
  const entries = [
    ...staticDocs.map((doc) => ({ doc, source: 'recent' })),
    ...dynamicDocs.map((doc) => ({ doc, source: 'retrieved' })),
  ].filter(({ doc }) => !seen.has(doc.id) && seen.add(doc.id))
  const blocks: string[] = []
  let used = 0
  for (const { doc, source } of entries) {
    const open =
      `<memory source="${source}" kind="${doc.kind}" step="${doc.step}" ` +
      `instance="${attribute(doc.instance_id)}">\n`
    const close = '\n</memory>'
    const text = defuse(doc.text)
    const room = maxChars - used - (blocks.length > 0 ? 2 : 0) - OMITTED_NOTE_CHARS - open.length - close.length
    if (room < Math.min(text.length, maxDocumentChars, MIN_TEXT_CHARS)) break
    const block = open + cut(text, Math.min(maxDocumentChars, room)) + close
    used += block.length + (blocks.length > 0 ? 2 : 0)
    blocks.push(block)
  }
  const omitted = entries.length - blocks.length
  if (omitted > 0) blocks.push(`(${omitted} more ${omitted === 1 ? 'memory' : 'memories'} omitted for length)`)
  return blocks.join('\n\n')
}

function defuse(text: string): string {
  return text.replace(/<\/?memory/gi, (tag) => tag.replace('<', '<\u200b'))
}

function attribute(value: string): string {
  return value.replace(/[&"<>]/g, (c) => `&#${c.charCodeAt(0)};`)
}

/** At most `max` characters, ending in `…` when cut, never splitting a surrogate pair. */
function cut(text: string, max: number): string {
  if (text.length <= max) return text
  let end = Math.max(0, max - 1)
  if (end > 0 && /[\ud800-\udbff]/.test(text[end - 1]!)) end--
  return `${text.slice(0, end)}…`
}
