/** The FNV-1a 32-bit offset basis; pass another basis to hash into a separate namespace. */
export const FNV_OFFSET = 0x811c9dc5

/**
 * FNV-1a over the UTF-16 code units `text[from..to)`, continuing from `basis`: fast, allocation-free,
 * and chainable (`fnv1a('b', 0, 1, fnv1a('a'))` equals `fnv1a('ab')`). Not for anything adversarial.
 * @example fnv1a('hello') // 1335831723
 */
export function fnv1a(text: string, from = 0, to = text.length, basis = FNV_OFFSET): number {
  let hash = basis >>> 0
  for (let i = from; i < to; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193) >>> 0
  return hash
}

/**
 * Murmur3's 32-bit finaliser: spreads every input bit over the output, so its bits can be used independently.
 * @example mix32(fnv1a('hello')) & 1 // 0 or 1, as good as a coin
 */
export function mix32(hash: number): number {
  hash = Math.imul(hash ^ (hash >>> 16), 0x85ebca6b)
  hash = Math.imul(hash ^ (hash >>> 13), 0xc2b2ae35)
  return (hash ^ (hash >>> 16)) >>> 0
}
