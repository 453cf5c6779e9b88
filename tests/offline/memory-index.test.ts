import { describe, expect, it } from 'vitest'
import { deserializeVector, quantizeVector, serializeVector } from '../../src/memory/vector-codec.ts'
import { dotProduct, normalizeVector } from '../../src/memory/vector-math.ts'
import { ExactVectorIndex, storedVectorRow } from '../../src/memory/exact-vector-index.ts'
import { indexedValue, VectorizeIndex, type VectorizeBinding } from '../../src/memory/vectorize-index.ts'
import { MemoryKind } from '../../src/schemas/memory.ts'
import { TopK } from '../../src/memory/top-k.ts'
import type { VectorEntry, VectorMetadata } from '../../src/memory/vector-index.ts'

/** mulberry32: a seeded PRNG, so random data is the same on every run. */
function random(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
}
function gaussianVectors(count: number, dimensions: number, seed: number): Float32Array[] {
  const next = random(seed)
  const gaussian = () => Math.sqrt(-2 * Math.log(1 - next())) * Math.cos(2 * Math.PI * next())
  return Array.from({ length: count }, () => normalizeVector(Array.from({ length: dimensions }, gaussian)))
}
const meta = (overrides: Partial<VectorMetadata> = {}): VectorMetadata => ({
  run_id: 'r1',
  instance_id: 'global',
  kind: 'analysis',
  step: 0,
  ...overrides,
})

describe('ExactVectorIndex ranking', () => {
  it('matches a float brute-force top-10 on random data (≥ 9 of 10 per query), scores within 0.02', async () => {
    const dimensions = 256
    const docs = gaussianVectors(3_000, dimensions, 1)
    const index = new ExactVectorIndex({ dimensions, capacity: 16 })
    await index.upsert(docs.map((vector, i) => ({ id: `d${i}`, vector, metadata: meta() })))
    // Half the queries are pure noise, half lie near a document, as real queries do.
    const noise = gaussianVectors(40, dimensions, 2)
    const queries = noise.map((q, i) => (i % 2 ? q : normalizeVector(q.map((x, k) => x * 0.6 + docs[i * 7]![k]!))))
    for (const query of queries) {
      const exact = docs
        .map((doc, i) => ({ id: `d${i}`, score: dotProduct(query, doc) }))
        .sort((a, b) => b.score - a.score)
        .slice(0, 10)
      const found = await index.query(query, { topK: 10, filter: { run_id: 'r1' } })
      const overlap = found.filter((match) => exact.some((e) => e.id === match.id)).length
      expect(overlap).toBeGreaterThanOrEqual(9)
      for (const match of found)
        expect(Math.abs(match.score - dotProduct(query, docs[Number(match.id.slice(1))]!))).toBeLessThan(0.02)
      expect(found.map((m) => m.score)).toEqual([...found.map((m) => m.score)].sort((a, b) => b - a))
    }
    expect(index.size).toBe(3_000)
    expect(index.stats().bytes).toBeGreaterThanOrEqual(3_000 * dimensions)
  })

  it('orders equal scores by id, whatever the insertion order', async () => {
    const index = new ExactVectorIndex({ dimensions: 4 })
    await index.upsert(['c', 'a', 'd', 'b'].map((id) => ({ id, vector: [1, 0, 0, 0], metadata: meta() })))
    expect((await index.query([1, 0, 0, 0], { topK: 3, filter: { run_id: 'r1' } })).map((m) => m.id)).toEqual([
      'a',
      'b',
      'c',
    ])
  })

  it('keeps the best k of a stream like a full sort would', () => {
    const next = random(9)
    const scores = Array.from({ length: 500 }, () => Math.round(next() * 50) / 50)
    const top = new TopK(25, (a, b) => a - b)
    scores.forEach((score, item) => {
      top.push(score, item)
    })
    const expected = scores
      .map((score, item) => ({ item, score }))
      .sort((a, b) => b.score - a.score || a.item - b.item)
      .slice(0, 25)
    expect(top.sorted()).toEqual(expected)
  })
})

describe('ExactVectorIndex filters', () => {
  const runs = ['r1', 'r2', 'r3']
  const instances = ['global', 'in-a', 'in-b']
  // Every document has the same vector, so only the filter can keep other runs' and instances' documents out.
  async function crowdedIndex() {
    const index = new ExactVectorIndex({ dimensions: 8 })
    const entries: VectorEntry[] = []
    for (const run_id of runs)
      for (const instance_id of instances)
        for (const kind of MemoryKind.options) {
          for (let step = 0; step < 3; step++)
            entries.push({
              id: `${run_id}/${instance_id}/${kind}/${step}`,
              vector: [1, 2, 3, 4, 5, 6, 7, 8],
              metadata: { run_id, instance_id, kind, step },
            })
        }
    await index.upsert(entries)
    return index
  }

  it('never returns a document of another run, instance or kind', async () => {
    const index = await crowdedIndex()
    const query = [1, 2, 3, 4, 5, 6, 7, 8]
    for (const run_id of runs) {
      const inRun = await index.query(query, { topK: 1_000, filter: { run_id } })
      expect(inRun).toHaveLength(instances.length * 4 * 3)
      expect(inRun.every((m) => m.id.startsWith(`${run_id}/`))).toBe(true)
      for (const instance_id of instances) {
        const inInstance = await index.query(query, { topK: 1_000, filter: { run_id, instance_id } })
        expect(inInstance).toHaveLength(12)
        expect(inInstance.every((m) => m.id.startsWith(`${run_id}/${instance_id}/`))).toBe(true)
        const kinds = ['batch_summary', 'rubric_update'] as const
        const ofKinds = await index.query(query, { topK: 1_000, filter: { run_id, instance_id, kinds: [...kinds] } })
        expect(ofKinds).toHaveLength(6)
        expect(ofKinds.every((m) => kinds.some((kind) => m.id.startsWith(`${run_id}/${instance_id}/${kind}/`)))).toBe(
          true,
        )
      }
    }
  })

  it('answers nothing for an unknown run or instance and for topK 0', async () => {
    const index = await crowdedIndex()
    expect(await index.query([1, 2, 3, 4, 5, 6, 7, 8], { topK: 5, filter: { run_id: 'nope' } })).toEqual([])
    expect(
      await index.query([1, 2, 3, 4, 5, 6, 7, 8], { topK: 5, filter: { run_id: 'r1', instance_id: 'nope' } }),
    ).toEqual([])
    expect(await index.query([1, 2, 3, 4, 5, 6, 7, 8], { topK: 0, filter: { run_id: 'r1' } })).toEqual([])
    expect(
      await index.query([1, 2, 3, 4, 5, 6, 7, 8], { topK: 1e12, filter: { run_id: 'r1', instance_id: 'in-a' } }),
    ).toHaveLength(12)
  })

  it('replaces an entry upserted again, metadata included', async () => {
    const index = new ExactVectorIndex({ dimensions: 2 })
    await index.upsert([{ id: 'm', vector: [1, 0], metadata: meta({ run_id: 'r1' }) }])
    await index.upsert([{ id: 'm', vector: [0, 1], metadata: meta({ run_id: 'r2' }) }])
    expect(index.size).toBe(1)
    expect(await index.query([0, 1], { topK: 5, filter: { run_id: 'r1' } })).toEqual([])
    const [match, ...rest] = await index.query([0, 1], { topK: 5, filter: { run_id: 'r2' } })
    expect(match!.id).toBe('m')
    expect(match!.score).toBeCloseTo(1, 6)
    expect(rest).toEqual([])
  })

  it('removes entries and still finds the rest with their own vectors', async () => {
    const vectors = gaussianVectors(50, 16, 3)
    const index = new ExactVectorIndex({ dimensions: 16 })
    await index.upsert(vectors.map((vector, i) => ({ id: `d${i}`, vector, metadata: meta() })))
    await index.remove(['d0', 'd10', 'd49', 'missing'])
    expect(index.size).toBe(47)
    for (const [i, vector] of vectors.entries()) {
      const [best] = await index.query(vector, { topK: 1, filter: { run_id: 'r1' } })
      if ([0, 10, 49].includes(i)) expect(best!.id).not.toBe(`d${i}`)
      else expect(best).toMatchObject({ id: `d${i}` })
    }
  })

  it('refuses vectors and queries of the wrong length', async () => {
    const index = new ExactVectorIndex({ dimensions: 4 })
    await expect(index.upsert([{ id: 'x', vector: [1, 2, 3], metadata: meta() }])).rejects.toThrow(RangeError)
    await expect(index.query([1, 2, 3], { topK: 1, filter: { run_id: 'r1' } })).rejects.toThrow(RangeError)
  })
})

describe('stored vectors', () => {
  it('serialise to one byte per dimension and come back as nearly the same unit vector', () => {
    const [vector] = gaussianVectors(1, 256, 4)
    const bytes = serializeVector(vector!)
    expect(bytes.byteLength).toBe(256)
    expect(bytes.buffer.byteLength).toBe(256)
    expect(dotProduct(deserializeVector(bytes), vector!)).toBeGreaterThan(0.999)
    expect(deserializeVector(bytes.slice().buffer)).toEqual(deserializeVector(bytes))
    expect(Array.from(quantizeVector([3, 4]))).toEqual([76, 102])
  })

  it('rebuild an index with load() that answers exactly like the original', async () => {
    const vectors = gaussianVectors(300, 32, 5)
    const entries = vectors.map((vector, i) => ({
      id: `d${i}`,
      vector,
      metadata: meta({ instance_id: i % 2 ? 'in-a' : 'in-b', step: i }),
    }))
    const original = new ExactVectorIndex({ dimensions: 32 })
    await original.upsert(entries)
    // As DO SQLite hands BLOBs back: a fresh ArrayBuffer per row.
    const rows = entries.map(storedVectorRow).map((row) => ({ ...row, vector: row.vector.slice().buffer }))
    const rebuilt = new ExactVectorIndex({ dimensions: 32 })
    rebuilt.load(rows)
    for (const query of gaussianVectors(10, 32, 6)) {
      const options = { topK: 7, filter: { run_id: 'r1', instance_id: 'in-a' } }
      expect(await rebuilt.query(query, options)).toEqual(await original.query(query, options))
    }
  })
})

describe('VectorizeIndex over a fake binding', () => {
  function fakeVectorize() {
    const calls = {
      upsert: [] as Parameters<VectorizeBinding['upsert']>[0][],
      query: [] as Parameters<VectorizeBinding['query']>[],
      deleteByIds: [] as string[][],
    }
    const binding: VectorizeBinding = {
      upsert: async (vectors) => void calls.upsert.push(vectors),
      query: async (...args) => {
        calls.query.push(args)
        return {
          matches: [
            { id: 'b', score: 0.5 },
            { id: 'a', score: 0.9 },
            { id: 'c', score: 0.5 },
          ],
        }
      },
      deleteByIds: async (ids) => void calls.deleteByIds.push(ids),
    }
    return { binding, calls }
  }

  it('accepts the real Vectorize binding type', () => {
    const accepts = (binding: VectorizeBinding) => binding
    expect(accepts).toBeTypeOf('function')
    // Compile-time only: `npx tsc` fails here if the structural type stops fitting workers-types' Vectorize.
    const check = (env: { VECTORS: Vectorize }) => accepts(env.VECTORS)
    expect(check).toBeTypeOf('function')
  })

  it('upserts in batches of 1000 with filterable metadata', async () => {
    const { binding, calls } = fakeVectorize()
    await new VectorizeIndex(binding).upsert(
      Array.from({ length: 2_500 }, (_, i) => ({ id: `d${i}`, vector: [1, 0, 0], metadata: meta({ step: 4 }) })),
    )
    expect(calls.upsert.map((batch) => batch.length)).toEqual([1_000, 1_000, 500])
    expect(calls.upsert[0]![0]).toEqual({
      id: 'd0',
      values: [1, 0, 0],
      metadata: { run_id: 'r1', instance_id: 'global', kind: 'analysis', step: 4 },
    })
  })

  it('queries with $eq/$in filters, no metadata, topK capped at 100, and ranks ties by id', async () => {
    const { binding, calls } = fakeVectorize()
    const index = new VectorizeIndex(binding)
    const matches = await index.query(new Float32Array([1, 0, 0]), {
      topK: 500,
      filter: { run_id: 'r1', instance_id: 'in-a', kinds: ['analysis', 'rubric_update'] },
    })
    expect(calls.query[0]).toEqual([
      [1, 0, 0],
      {
        topK: 100,
        filter: { run_id: { $eq: 'r1' }, instance_id: { $eq: 'in-a' }, kind: { $in: ['analysis', 'rubric_update'] } },
        returnMetadata: 'none',
      },
    ])
    expect(matches.map((m) => m.id)).toEqual(['a', 'b', 'c'])
    await index.query([1, 0, 0], { topK: 3, filter: { run_id: 'r1' } })
    expect(calls.query[1]![1]).toEqual({ topK: 3, filter: { run_id: { $eq: 'r1' } }, returnMetadata: 'none' })
    expect(index.maxTopK).toBe(100)
  })

  it('keeps long instance ids apart although Vectorize indexes only 64 bytes of a string', async () => {
    const prefix = 'x'.repeat(70)
    const [a, b] = [indexedValue(`${prefix}-a`), indexedValue(`${prefix}-b`)]
    expect(a).not.toBe(b)
    for (const value of [a, b, indexedValue('é'.repeat(80))])
      expect(new TextEncoder().encode(value).length).toBeLessThanOrEqual(64)
    expect(indexedValue('in-3f1c')).toBe('in-3f1c')
    const { binding, calls } = fakeVectorize()
    await new VectorizeIndex(binding).upsert([{ id: 'd', vector: [1], metadata: meta({ instance_id: `${prefix}-a` }) }])
    await new VectorizeIndex(binding).query([1], { topK: 1, filter: { run_id: 'r1', instance_id: `${prefix}-a` } })
    expect(calls.upsert[0]![0]!.metadata!.instance_id).toBe(a)
    expect(calls.query[0]![1].filter).toMatchObject({ instance_id: { $eq: a } })
  })

  it('refuses ids over 64 bytes and vectors over 1536 dimensions, and deletes in batches', async () => {
    const { binding, calls } = fakeVectorize()
    const index = new VectorizeIndex(binding)
    await expect(index.upsert([{ id: 'i'.repeat(65), vector: [1], metadata: meta() }])).rejects.toThrow(RangeError)
    await expect(index.upsert([{ id: 'd', vector: new Float32Array(1_537), metadata: meta() }])).rejects.toThrow(
      RangeError,
    )
    expect(calls.upsert).toHaveLength(0)
    await index.remove(Array.from({ length: 1_200 }, (_, i) => `d${i}`))
    expect(calls.deleteByIds.map((ids) => ids.length)).toEqual([1_000, 200])
  })
})
