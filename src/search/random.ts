/**
 * Seeded randomness for the search: a small PRNG (sfc32) whose whole state is four 32-bit words, so a
 * checkpoint can store it and a resumed run continues the very same sequence; and fast string hashes
 * that derive independent seeds from names (`derivedSeed('propose', promptId, generation)`), so work
 * that runs concurrently never has to share one generator. Not for anything adversarial.
 */

/** The serialisable state of an {@link Rng}: four unsigned 32-bit words. */
export interface RngState {
  algorithm: 'sfc32'
  words: [number, number, number, number]
}

/**
 * 32-bit string hash (MurmurHash3-style mixing over UTF-16 code units), seedable for independent streams.
 * @example hash32('hello') === hash32('hello') // true; hash32('hello', 1) differs
 */
export function hash32(text: string, seed = 0): number {
  let h = (seed ^ 0x9e3779b9) >>> 0
  for (let i = 0; i < text.length; i++) {
    let k = Math.imul(text.charCodeAt(i), 0xcc9e2d51)
    k = Math.imul((k << 15) | (k >>> 17), 0x1b873593)
    h ^= k
    h = (Math.imul((h << 13) | (h >>> 19), 5) + 0xe6546b64) | 0
  }
  h ^= text.length
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b)
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35)
  return (h ^ (h >>> 16)) >>> 0
}

/**
 * A 64-bit content hash as 16 hex digits (two independent 32-bit hashes): cache keys and fingerprints.
 * @example hashHex('{"a":1}') // e.g. '3f1c0a9d5e2b7c44'
 */
export function hashHex(text: string): string {
  return hash32(text, 0x2545f491).toString(16).padStart(8, '0') + hash32(text, 0x6c8e9cf5).toString(16).padStart(8, '0')
}

/**
 * An unsigned 32-bit seed derived from named parts; the same parts always give the same seed.
 * @example derivedSeed(7, 'propose', 'p1', 3, 0) // the seed of child 0 of prompt p1 in generation 3
 */
export function derivedSeed(...parts: Array<string | number>): number {
  return hash32(parts.map(String).join('\u001f'))
}

/** splitmix32: spreads one seed over the four sfc32 words. */
function splitmix32(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x9e3779b9) | 0
    let z = state
    z = Math.imul(z ^ (z >>> 16), 0x21f0aaad)
    z = Math.imul(z ^ (z >>> 15), 0x735a2d97)
    return (z ^ (z >>> 15)) >>> 0
  }
}

/**
 * A seeded PRNG (sfc32) with serialisable state and the helpers the search needs.
 * @example
 * const rng = Rng.fromSeed(7)
 * rng.int(6) // 0..5
 * const again = Rng.fromState(rng.state()) // continues the same sequence
 */
export class Rng {
  private a: number
  private b: number
  private c: number
  private d: number

  private constructor(words: readonly [number, number, number, number]) {
    ;[this.a, this.b, this.c, this.d] = words.map((word) => word >>> 0) as [number, number, number, number]
  }

  /**
   * A generator seeded from one integer (warmed up, so nearby seeds diverge at once).
   * @example Rng.fromSeed(derivedSeed(7, 'prompt', 'p1'))
   */
  static fromSeed(seed: number): Rng {
    const mix = splitmix32(seed)
    const rng = new Rng([mix(), mix(), mix(), mix()])
    for (let i = 0; i < 12; i++) rng.nextUint32()
    return rng
  }

  /**
   * A generator that continues from a saved {@link RngState}.
   * @example Rng.fromState(JSON.parse(JSON.stringify(rng.state())))
   */
  static fromState(state: RngState): Rng {
    if (
      state.algorithm !== 'sfc32' ||
      state.words.length !== 4 ||
      !state.words.every((word) => Number.isInteger(word))
    ) {
      throw new TypeError('rng state: expected { algorithm: "sfc32", words: [4 integers] }')
    }
    return new Rng(state.words)
  }

  /**
   * The current state, a plain JSON value.
   * @example const saved = rng.state(); rng.next(); Rng.fromState(saved).next() // the same number
   */
  state(): RngState {
    return { algorithm: 'sfc32', words: [this.a, this.b, this.c, this.d] }
  }

  /**
   * The next unsigned 32-bit integer.
   * @example rng.nextUint32() // 0..4294967295
   */
  nextUint32(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0
    this.d = (this.d + 1) | 0
    this.a = this.b ^ (this.b >>> 9)
    this.b = (this.c + (this.c << 3)) | 0
    this.c = (this.c << 21) | (this.c >>> 11)
    this.c = (this.c + t) | 0
    return t >>> 0
  }

  /**
   * A float in [0, 1).
   * @example rng.next() < 0.8 // true 80% of the time
   */
  next(): number {
    return this.nextUint32() / 4_294_967_296
  }

  /**
   * An integer in [0, maxExclusive).
   * @example rng.int(6) // 0..5
   */
  int(maxExclusive: number): number {
    if (!Number.isInteger(maxExclusive) || maxExclusive <= 0)
      throw new RangeError(`rng.int: expected a positive integer, got ${maxExclusive}`)
    return Math.floor(this.next() * maxExclusive)
  }

  /**
   * A uniformly chosen element.
   * @example rng.pick(['a', 'b', 'c'])
   */
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError('rng.pick: empty list')
    return items[this.int(items.length)]!
  }

  /**
   * A new array with the items in random order (Fisher–Yates).
   * @example rng.shuffle([1, 2, 3]) // e.g. [3, 1, 2]
   */
  shuffle<T>(items: readonly T[]): T[] {
    const out = [...items]
    for (let i = out.length - 1; i > 0; i--) {
      const j = this.int(i + 1)
      ;[out[i], out[j]] = [out[j]!, out[i]!]
    }
    return out
  }

  /**
   * `count` distinct items drawn without replacement, in draw order (all of them, shuffled, when count ≥ length).
   * @example rng.sample(['a', 'b', 'c', 'd'], 2) // e.g. ['d', 'a']
   */
  sample<T>(items: readonly T[], count: number): T[] {
    const pool = [...items]
    const take = Math.max(0, Math.min(count, pool.length))
    for (let i = 0; i < take; i++) {
      const j = i + this.int(pool.length - i)
      ;[pool[i], pool[j]] = [pool[j]!, pool[i]!]
    }
    return pool.slice(0, take)
  }
}

/**
 * A tiny PRNG (mulberry32) returning floats in [0, 1): for mocks and samplers that need a sequence, not a
 * checkpointable state (use {@link Rng} for those).
 * @example const random = mulberry32(7); random() // the same number for the same seed
 */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
}
