import { chunk } from './chunk.ts'
import { fnv1a, mix32 } from '../hash/index.ts'
import type { VectorEntry, VectorFilter, VectorIndex, VectorMatch, VectorQueryOptions } from './vector-index.ts'

/** Vectorize's filter syntax, as far as this adapter uses it. */
type VectorizeFilter = Record<string, { $eq: string } | { $in: string[] }>

/**
 * The part of a Vectorize binding this adapter uses, typed structurally so `src/` needs no Cloudflare types;
 * `env.VECTORS` (type `Vectorize`) fits it as is.
 */
export interface VectorizeBinding {
  upsert(
    vectors: { id: string; values: number[] | Float32Array; metadata?: Record<string, string | number> }[],
  ): Promise<unknown>
  query(
    vector: number[] | Float32Array,
    options: { topK: number; filter?: VectorizeFilter; returnMetadata?: 'none'; returnValues?: false },
  ): Promise<{ matches: { id: string; score: number }[] }>
  deleteByIds(ids: string[]): Promise<unknown>
}

/**
 * Vectorize's limits (platform docs): topK without values or metadata, vectors per upsert from a Worker, dims, id and
 * indexed string bytes.
 */
const VECTORIZE_LIMITS = {
  topK: 100,
  upsertBatch: 1_000,
  dimensions: 1_536,
  idBytes: 64,
  indexedBytes: 64,
} as const
const encoder = new TextEncoder()

/**
 * The production index over Vectorize. The index must use the cosine metric and the embedder's dimensions, and
 * its metadata indexes must exist before the first insert, or filters silently match nothing:
 * `wrangler vectorize create-metadata-index <index> --property-name=run_id --type=string` (and `instance_id`, `kind`).
 * Writes are eventually consistent (seconds to minutes): keep D1 as the source of truth and never assume
 * read-after-write. `topK` is capped at 100 (no metadata or values are returned) and upserts go in batches of 1000.
 * @example const index = new VectorizeIndex(env.VECTORS)
 */
export class VectorizeIndex implements VectorIndex {
  readonly maxTopK = VECTORIZE_LIMITS.topK

  constructor(private readonly binding: VectorizeBinding) {}

  async upsert(entries: VectorEntry[]): Promise<void> {
    for (const entry of entries) {
      if (encoder.encode(entry.id).length > VECTORIZE_LIMITS.idBytes)
        throw new RangeError(`vector id "${entry.id}" is longer than 64 bytes`)
      if (entry.vector.length > VECTORIZE_LIMITS.dimensions)
        throw new RangeError(`vector ${entry.id} has ${entry.vector.length} dimensions; Vectorize takes at most 1536`)
    }
    for (const batch of chunk(entries, VECTORIZE_LIMITS.upsertBatch)) {
      await this.binding.upsert(
        batch.map(({ id, vector, metadata }) => ({
          id,
          values: Array.from(vector),
          metadata: {
            run_id: indexedValue(metadata.run_id),
            instance_id: indexedValue(metadata.instance_id),
            kind: metadata.kind,
            step: metadata.step,
          },
        })),
      )
    }
  }

  async query(vector: ArrayLike<number>, { topK, filter }: VectorQueryOptions): Promise<VectorMatch[]> {
    if (topK < 1) return []
    const { matches } = await this.binding.query(Array.from(vector), {
      topK: Math.min(Math.floor(topK), VECTORIZE_LIMITS.topK),
      filter: vectorizeFilter(filter),
      returnMetadata: 'none',
    })
    return matches
      .map(({ id, score }) => ({ id, score }))
      .sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  }

  async remove(ids: string[]): Promise<void> {
    for (const batch of chunk(ids, VECTORIZE_LIMITS.upsertBatch)) await this.binding.deleteByIds(batch)
  }
}

/**
 * A filter in Vectorize's operator syntax.
 * @example vectorizeFilter({ run_id: 'r1', kinds: ['analysis'] }) // { run_id: { $eq: 'r1' }, kind: { $in: ['analysis']
 *   } }
 */
function vectorizeFilter(filter: VectorFilter): VectorizeFilter {
  return {
    run_id: { $eq: indexedValue(filter.run_id) },
    ...(filter.instance_id === undefined ? {} : { instance_id: { $eq: indexedValue(filter.instance_id) } }),
    ...(filter.kinds === undefined ? {} : { kind: { $in: [...filter.kinds] } }),
  }
}

/**
 * A metadata value Vectorize can filter on exactly: it indexes only the first 64 bytes of a string, so two long ids
 * sharing a prefix would match each other. Longer values become their first ≤24 bytes plus a 128-bit hash (57 bytes at
 * most).
 * @example indexedValue('global') // 'global'
 * @internal
 */
export function indexedValue(value: string): string {
  if (encoder.encode(value).length <= VECTORIZE_LIMITS.indexedBytes) return value
  const digest = [0x811c9dc5, 0x9e3779b9, 0x85ebca6b, 0xc2b2ae35].map((basis) =>
    mix32(fnv1a(value, 0, value.length, basis))
      .toString(16)
      .padStart(8, '0'),
  )
  let prefix = ''
  for (const character of value) {
    if (encoder.encode(prefix + character).length > 24) break
    prefix += character
  }
  return `${prefix}~${digest.join('')}`
}
