import { describe, expect, it, vi } from 'vitest'
import { hashHex } from '../../src/search/index.ts'
import { createLimiter, mapConcurrent } from '../../src/search/algorithms/concurrency.ts'
import { derivedSeed, hash32, Rng } from '../../src/hash/index.ts'

describe('Rng', () => {
  it('gives the same sequence for the same seed and a different one for another seed', () => {
    const draw = (seed: number) =>
      Array.from(
        { length: 5 },
        (() => {
          const rng = Rng.fromSeed(seed)
          return () => rng.nextUint32()
        })(),
      )
    expect(draw(7)).toEqual(draw(7))
    expect(draw(7)).not.toEqual(draw(8))
  })

  it('continues exactly from a JSON round-trip of its state', () => {
    const rng = Rng.fromSeed(42)
    rng.next()
    const copy = Rng.fromState(JSON.parse(JSON.stringify(rng.state())))
    expect(Array.from({ length: 10 }, () => copy.next())).toEqual(Array.from({ length: 10 }, () => rng.next()))
    expect(() => Rng.fromState({ algorithm: 'sfc32', words: [1, 2, 3] as never })).toThrow(/rng state/)
  })

  it('draws ints in range, samples without replacement and shuffles into a permutation', () => {
    const rng = Rng.fromSeed(1)
    const ints = Array.from({ length: 1000 }, () => rng.int(6))
    expect(Math.min(...ints)).toBe(0)
    expect(Math.max(...ints)).toBe(5)
    const sample = rng.sample([1, 2, 3, 4, 5, 6, 7], 4)
    expect(new Set(sample).size).toBe(4)
    expect(rng.sample([1, 2], 5).sort()).toEqual([1, 2])
    expect(rng.shuffle([1, 2, 3, 4, 5]).sort()).toEqual([1, 2, 3, 4, 5])
    expect(['a', 'b']).toContain(rng.pick(['a', 'b']))
  })

  it('derives stable, distinct seeds from parts', () => {
    expect(derivedSeed(7, 'propose', 'p1', 0)).toBe(derivedSeed(7, 'propose', 'p1', 0))
    expect(derivedSeed(7, 'propose', 'p1', 0)).not.toBe(derivedSeed(7, 'propose', 'p1', 1))
    expect(derivedSeed('a', 'bc')).not.toBe(derivedSeed('ab', 'c'))
    expect(hash32('hello')).not.toBe(hash32('hello', 1))
    expect(hashHex('x')).toMatch(/^[0-9a-f]{16}$/)
  })
})

describe('createLimiter / mapConcurrent', () => {
  it('runs at most `limit` tasks at once, in arrival order, and keeps results in input order', async () => {
    const limit = createLimiter(2)
    let active = 0
    let peak = 0
    const started: number[] = []
    const results = await Promise.all(
      [0, 1, 2, 3, 4].map((i) =>
        limit(async () => {
          started.push(i)
          peak = Math.max(peak, ++active)
          for (let k = 0; k < 3; k++) await Promise.resolve()
          active--
          return i * 10
        }),
      ),
    )
    expect(results).toEqual([0, 10, 20, 30, 40])
    expect(started).toEqual([0, 1, 2, 3, 4])
    expect(peak).toBe(2)
    expect(await mapConcurrent([3, 1, 2], 2, async (x) => x * 2)).toEqual([6, 2, 4])
  })

  it('rejects waiting tasks once the signal aborts, without starting them', async () => {
    const controller = new AbortController()
    const limit = createLimiter(1, controller.signal)
    let release!: () => void
    const first = limit(() => new Promise<string>((resolve) => (release = () => resolve('done'))))
    await vi.waitFor(() => expect(release).toBeTypeOf('function'))
    let ran = false
    const second = limit(async () => (ran = true))
    controller.abort(new Error('stop'))
    release()
    expect(await first).toBe('done')
    await expect(second).rejects.toThrow('stop')
    expect(ran).toBe(false)
  })
})
