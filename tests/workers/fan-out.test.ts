/**
 * `handOut`: how a batch is split into chunks for other invocations, how many, and what happens to a chunk whose
 * invocation fails. Plain functions stand in for the two sides, so each chunk is seen as it is handed out.
 */
import { describe, expect, it, vi } from 'vitest'
import { handOut } from '../../workers/scoring/fan-out.ts'

const numbers = (count: number) => Array.from({ length: count }, (_, i) => i)
/** Each side answers its items doubled, so a result shows which item it belongs to. */
const doubled = async (part: readonly number[]) => part.map((n) => n * 2)

/** Runs `handOut` on `count` items with both sides recorded; answers the results and the parts each side got. */
async function split(
  count: number,
  failing: (part: number[], index: number) => boolean = () => false,
  lost?: (item: number) => number,
) {
  const here = vi.fn(doubled)
  let handed = 0
  const away = vi.fn(async (part: number[]) => {
    if (failing(part, handed++)) throw new Error('the invocation was lost')
    return doubled(part)
  })
  const results = await handOut(numbers(count), here, away, 'test', lost)
  return {
    results,
    handedOut: away.mock.calls.map(([part]) => part),
    judgedHere: here.mock.calls.map(([part]) => [...part]),
  }
}

const sizes = (parts: number[][]) => parts.map((part) => part.length)

describe('handOut', () => {
  it('judges up to 24 items here, and any number here when nothing can take chunks', async () => {
    const few = await split(24)
    expect(few.handedOut).toEqual([])
    expect(few.judgedHere).toEqual([numbers(24)])
    expect(few.results).toEqual(numbers(24).map((n) => n * 2))

    const here = vi.fn(doubled)
    expect(await handOut(numbers(1_000), here, undefined, 'test')).toEqual(numbers(1_000).map((n) => n * 2))
    expect(here.mock.calls.map(([part]) => part.length)).toEqual([1_000])
  })

  // Expected sizes by hand: one chunk per 24 items (rounded down), at most 30 (a request reaches at most 32
  // invocations, itself included), the items spread so chunk sizes differ by at most one.
  it.each([
    { items: 25, chunks: [25] },
    { items: 48, chunks: [24, 24] },
    { items: 71, chunks: [36, 35] },
    { items: 100, chunks: [25, 25, 25, 25] },
    { items: 250, chunks: Array(10).fill(25) },
    { items: 720, chunks: Array(30).fill(24) },
    { items: 721, chunks: [25, ...Array(29).fill(24)] },
    { items: 1_024, chunks: [...Array(4).fill(35), ...Array(26).fill(34)] },
    { items: 8_192, chunks: [...Array(2).fill(274), ...Array(28).fill(273)] },
  ])(
    'hands $items items out as $chunks.length chunk(s), none here, results in input order',
    async ({ items, chunks }) => {
      const { results, handedOut, judgedHere } = await split(items)
      expect(sizes(handedOut)).toEqual(chunks)
      expect(handedOut.flat()).toEqual(numbers(items))
      expect(judgedHere).toEqual([])
      expect(results).toEqual(numbers(items).map((n) => n * 2))
    },
  )

  it('judges here a chunk whose invocation failed, once, and keeps every result in input order', async () => {
    // The second of 4 chunks (items 25..49) is lost.
    const { results, handedOut, judgedHere } = await split(100, (_, index) => index === 1)
    expect(sizes(handedOut)).toEqual([25, 25, 25, 25])
    expect(judgedHere).toEqual([numbers(100).slice(25, 50)])
    expect(results).toEqual(numbers(100).map((n) => n * 2))
  })

  it('answers `lost` for the items of a failed chunk when given one, judging none of them here', async () => {
    const { results, judgedHere } = await split(
      100,
      (_, index) => index === 1,
      () => -1,
    )
    expect(judgedHere).toEqual([])
    expect(results).toEqual(numbers(100).map((n) => (n >= 25 && n < 50 ? -1 : n * 2)))
  })

  it('judges everything here when every invocation fails', async () => {
    const { results, judgedHere } = await split(100, () => true)
    expect(sizes(judgedHere)).toEqual([25, 25, 25, 25])
    expect(results).toEqual(numbers(100).map((n) => n * 2))
  })

  it('fails the batch only when a chunk fails both away and here', async () => {
    const here = vi.fn(async (part: readonly number[]) => {
      if (part.includes(60)) throw new Error('the model is down')
      return doubled(part)
    })
    const away = async () => {
      throw new Error('the invocation was lost')
    }
    await expect(handOut(numbers(100), here, away, 'test')).rejects.toThrow('the model is down')
  })
})
