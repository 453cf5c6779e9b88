/** A bracketed slot of a reply shape: `<2-4 sentences>`, `<criterion>`, `<memory id or short reference>`. */
const SLOT = /<[^<>\n]{1,60}>/g
/** A value that opens with a slot-shaped tag of words joined by hyphens or spaces (`<referee-name>This is…`). */
const OPENING_SLOT = /^\s*<[a-z0-9]+(?:[- ][a-z0-9]+)+>/i
/** Fields that quote the policy's answer, where a tag may open the quote. */
const QUOTES = new Set(['evidence', 'examples'])

/**
 * The first string of an agent's reply that copies its prompt's reply shape instead of answering: one that holds a
 * slot the system prompt shows (a small model writes `"rationale": "<2-4 sentences>"` or `Patterns: <pattern>`), or
 * one that opens with a slot-shaped tag (`<referee-name>…`) outside the fields that quote an answer. Its path and
 * text, or undefined.
 * @example copiedPlaceholder({ rationale: '<2-4 sentences>' }, '… "rationale": "<2-4 sentences>" …')
 *   // { path: 'rationale', text: '<2-4 sentences>' }
 */
export function copiedPlaceholder(reply: unknown, systemPrompt: string): { path: string; text: string } | undefined {
  const slots = new Set([...systemPrompt.matchAll(SLOT)].map((match) => match[0].toLowerCase()))
  const visit = (value: unknown, path: string, quoted: boolean): { path: string; text: string } | undefined => {
    if (typeof value === 'string') {
      const copied = [...value.matchAll(SLOT)].some((match) => slots.has(match[0].toLowerCase()))
      return copied || (!quoted && OPENING_SLOT.test(value)) ? { path, text: value } : undefined
    }
    if (Array.isArray(value)) {
      for (const [index, item] of value.entries()) {
        const found = visit(item, `${path}[${index}]`, quoted)
        if (found) return found
      }
      return undefined
    }
    if (typeof value !== 'object' || value === null) return undefined
    for (const [key, item] of Object.entries(value)) {
      const found = visit(item, path ? `${path}.${key}` : key, quoted || QUOTES.has(key))
      if (found) return found
    }
    return undefined
  }
  return visit(reply, '', false)
}

/**
 * An agent's reply text with each list entry that is nothing but a slot of the system prompt left out: the entry is
 * empty (a small model fills a list it has nothing for with the shape's own `"observations": ["<short note>"]`), so
 * the rest of the reply stands, and the list's bounds still apply. Text that is not a JSON object is answered as it
 * is; so is a reply with no such entry.
 * @example withoutEmptyEntries('{"observations": ["<short note>"]}', '… ["<short note>"] …') // '{"observations":[]}'
 */
export function withoutEmptyEntries(text: string, systemPrompt: string, parse: (text: string) => unknown): string {
  // Most replies (every grade a scorer sends on /score) hold no `<` at all: nothing to leave out, nothing parsed twice.
  if (!text.includes('<')) return text
  const slots = new Set([...systemPrompt.matchAll(SLOT)].map((match) => match[0].toLowerCase()))
  let value: unknown
  try {
    value = parse(text)
  } catch {
    return text
  }
  let dropped = 0
  const isEmptyEntry = (item: unknown) => typeof item === 'string' && slots.has(item.trim().toLowerCase())
  const visit = (item: unknown): unknown => {
    if (Array.isArray(item)) {
      const kept = item.filter((entry) => !isEmptyEntry(entry))
      dropped += item.length - kept.length
      return kept.map(visit)
    }
    if (typeof item !== 'object' || item === null) return item
    return Object.fromEntries(Object.entries(item).map(([key, entry]) => [key, visit(entry)]))
  }
  const cleaned = visit(value)
  return dropped > 0 ? JSON.stringify(cleaned) : text
}
