/**
 * The small seeded randomness the search roles' mocks need: a 32-bit string hash and a PRNG
 * (mulberry32) seeded from named parts. Synchronous, so the mock chat model can use it while answering.
 * Not for anything adversarial.
 */
import { fnv1a, mix32 } from '../../hash/index.ts'
import { mulberry32 } from '../random.ts'

/**
 * FNV-1a over the UTF-16 code units of `text`, finished with a murmur-style avalanche.
 * @example hash32('abc') === hash32('abc') // true
 */
export function hash32(text: string): number {
  return mix32(fnv1a(text))
}

/**
 * `hash32` as 8 hex digits.
 * @example hex8('What is 2+2?') // e.g. '5c1d0e9a'
 */
export function hex8(text: string): string {
  return hash32(text).toString(16).padStart(8, '0')
}

/**
 * A PRNG returning floats in [0, 1), seeded by named parts: the same parts always give the same sequence.
 * @example const random = seededRandom('propose', 7); random() // the same number on every run
 */
export function seededRandom(...parts: Array<string | number>): () => number {
  return mulberry32(hash32(parts.map(String).join('\u001f')))
}

/**
 * A new array with the items in a seeded random order (Fisher–Yates).
 * @example seededShuffle([1, 2, 3, 4], seededRandom('samples', 7)) // the same order for seed 7 every time
 */
export function seededShuffle<T>(items: readonly T[], random: () => number): T[] {
  const out = [...items]
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1))
    ;[out[i], out[j]] = [out[j]!, out[i]!]
  }
  return out
}
