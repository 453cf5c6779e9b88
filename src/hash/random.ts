/**
 * The project's one seeded PRNG (sfc32): its whole state is four 32-bit words, so a checkpoint can store it and
 * a resumed run continues the very same sequence. Seeds come from named parts ({@link derivedSeed}), so work that
 * runs concurrently never has to share one generator. Not for anything adversarial.
 */
import { derivedSeed } from './fnv.ts'

/** The serialisable state of an {@link Rng}: four unsigned 32-bit words. */
export interface RngState {
  algorithm: 'sfc32'
  words: [number, number, number, number]
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
    return shuffle(items, () => this.next())
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
 * A generator of floats in [0, 1), seeded by named parts: the same parts always give the same sequence. For mocks
 * and samplers that need a sequence, not a checkpointable state.
 * @example const random = seededRandom('propose', 7); random() // the same number on every run
 */
export function seededRandom(...parts: Array<string | number>): () => number {
  const rng = Rng.fromSeed(derivedSeed(...parts))
  return () => rng.next()
}

/**
 * A new array with the items in random order (Fisher–Yates), drawing from `random`.
 * @example shuffle([1, 2, 3, 4], seededRandom('samples', 7)) // the same order for seed 7 every time
 */
export function shuffle<T>(items: readonly T[], random: () => number): T[] {
  const out = [...items]
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1))
    ;[out[i], out[j]] = [out[j]!, out[i]!]
  }
  return out
}
