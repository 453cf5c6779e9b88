/** The FNV-1a 32-bit offset basis; pass another basis to hash into a separate namespace. */
const FNV_OFFSET = 0x811c9dc5

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

/**
 * The project's 32-bit string hash: FNV-1a finished with {@link mix32}; `seed` picks an independent stream.
 * @example hash32('hello') === hash32('hello') // true; hash32('hello', 1) differs
 */
export function hash32(text: string, seed = 0): number {
  return mix32(fnv1a(text, 0, text.length, (FNV_OFFSET ^ seed) >>> 0))
}

/**
 * {@link hash32} as 8 hex digits: short, stable ids for mock replies and labels.
 * @example hex8('What is 2+2?') // e.g. '5c1d0e9a'
 */
export function hex8(text: string, seed = 0): string {
  return hash32(text, seed).toString(16).padStart(8, '0')
}

/**
 * A 64-bit content hash as 16 hex digits (two independent 32-bit streams): cache keys and fingerprints.
 * @example hashHex('{"a":1}') // e.g. '3f1c0a9d5e2b7c44'
 */
export function hashHex(text: string): string {
  return hex8(text, 0x2545f491) + hex8(text, 0x6c8e9cf5)
}

/**
 * An unsigned 32-bit seed derived from named parts; the same parts always give the same seed.
 * @example derivedSeed(7, 'propose', 'p1', 3, 0) // the seed of child 0 of prompt p1 in generation 3
 */
export function derivedSeed(...parts: Array<string | number>): number {
  return hash32(parts.map(String).join('\u001f'))
}
