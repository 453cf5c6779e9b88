/**
 * Word-level helpers the agents' offline mock replies share: content words without stop words, overlap, the sentence
 * around a match. Deterministic and language-agnostic (Unicode letters and digits).
 */

const STOP_WORDS = new Set(
  [
    'a an the and or but of to in on at for with by is are was were be been it this that these those as from',
    'what which who how why when where do does did can should would will not no yes',
  ]
    .join(' ')
    .split(' '),
)

/**
 * The distinct lower-cased content words of a text (stop words dropped).
 * @example contentWords('The cat and the hat') // Set { 'cat', 'hat' }
 */
export function contentWords(text: string): Set<string> {
  return new Set(contentTokens(text))
}

/**
 * The lower-cased content words of a text in order, repeats kept (stop words dropped).
 * @example contentTokens('cat cat hat') // ['cat', 'cat', 'hat']
 */
export function contentTokens(text: string): string[] {
  return (text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []).filter((word) => !STOP_WORDS.has(word))
}

/**
 * The distinct lower-cased content words of a text with each number kept whole across its decimal points and clock
 * colons ("177.8", "11:13:20", not "177" and "8"), stop words dropped: the terms a fact check would name.
 * @example wordsAndNumbers('They meet at 11:13, about 177.8 km out.') // Set { 'they', 'meet', '11:13', 'about',
 *   '177.8', 'km', 'out' }
 */
export function wordsAndNumbers(text: string): Set<string> {
  const terms = text.toLowerCase().match(/[\p{L}\p{N}]+(?:[.:]\p{N}+)*/gu) ?? []
  return new Set(terms.filter((term) => !STOP_WORDS.has(term)))
}

/**
 * Whether `text` states `phrase` as a whole (case-insensitive): not inside a longer word or number, so "20" is not
 * found in "2006", "13" not in "133" and the list marker "1." not in "1.67". An empty phrase is never found.
 * @example mentions('Stockholm cut traffic by 20%.', '20') // true
 * @example mentions('The scheme began in 2006.', '20') // false
 */
export function mentions(text: string, phrase: string): boolean {
  const wanted = phrase.trim().toLowerCase()
  if (wanted === '') return false
  const escaped = wanted.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
  return new RegExp(`(?<![\\p{L}\\p{N}])${escaped}(?![\\p{L}\\p{N}])`, 'u').test(text.toLowerCase())
}

/**
 * Words of any kind, stop words included.
 * @example wordCount('The cat sat.') // 3
 */
export function wordCount(text: string): number {
  return (text.match(/[\p{L}\p{N}]+/gu) ?? []).length
}

/**
 * Share of `wanted` words present in `found`.
 * @example overlap(new Set(['a1', 'b2']), new Set(['a1'])) // 0.5
 */
export function overlap(wanted: Set<string>, found: Set<string>): number {
  if (wanted.size === 0) return 0
  let hits = 0
  for (const word of wanted) if (found.has(word)) hits++
  return hits / wanted.size
}

/**
 * The sentence holding a match, at most 200 characters: the evidence an analyst would quote.
 * @example sentenceAround('Fine. Give me 10/10. Done.', 6, 4) // 'Give me 10/10.'
 */
export function sentenceAround(text: string, index: number, length: number): string {
  const before = text.slice(0, index)
  const start = Math.max(before.search(/[^.!?\n。！？]*$/u), index - 120)
  const rest = text.slice(index + length)
  const stop = rest.search(/[.!?\n。！？]/u)
  const end = index + length + (stop < 0 ? Math.min(rest.length, 80) : Math.min(stop + 1, 80))
  return text.slice(start, end).trim().slice(0, 200)
}

/**
 * Evidence quotes without repeats: a quote contained in a longer one is dropped.
 * @example withoutOverlaps(['10/10', 'Give me 10/10.']) // ['Give me 10/10.']
 */
export function withoutOverlaps(quotes: readonly string[]): string[] {
  const distinct = unique(quotes)
  return distinct.filter((quote) => !distinct.some((other) => other !== quote && other.includes(quote)))
}

/**
 * The distinct items, in first-seen order.
 * @example unique([2, 1, 2]) // [2, 1]
 */
export function unique<T>(items: readonly T[]): T[] {
  return [...new Set(items)]
}

/**
 * Items with their counts, most frequent first, ties in first-seen order.
 * @example byFrequency(['b', 'a', 'a']) // [['a', 2], ['b', 1]]
 */
export function byFrequency(items: readonly string[]): [string, number][] {
  const counts = new Map<string, number>()
  for (const item of items) counts.set(item, (counts.get(item) ?? 0) + 1)
  return [...counts.entries()].sort((a, b) => b[1] - a[1])
}

/**
 * Rubric ids quoted and comma-separated, as the analyses name them.
 * @example quotedList(['r1', 'r2']) // "'r1', 'r2'"
 */
export function quotedList(ids: readonly string[]): string {
  return ids.map((id) => `'${id}'`).join(', ')
}
