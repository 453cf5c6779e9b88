import type { MemoryKind, MemoryScope } from '../schemas/memory.ts'

/** What every vector carries so searches can be confined to a run, an instance and some kinds. */
export interface VectorMetadata {
  run_id: string
  instance_id: string
  kind: MemoryKind
  step: number
}

export interface VectorEntry {
  /** The memory document's id (at most 64 bytes). */
  id: string
  vector: ArrayLike<number>
  metadata: VectorMetadata
}

/** Always one run; optionally one instance and some kinds. */
export type VectorFilter = MemoryScope

export interface VectorMatch {
  id: string
  /** Cosine similarity to the query. */
  score: number
}

export interface VectorQueryOptions {
  topK: number
  filter: VectorFilter
}

/**
 * The vector index port. Adapters: `ExactVectorIndex` (in memory, exact, held by a Durable Object; local dev
 * and tests) and `VectorizeIndex` (production). Matches come best first; the filter is never crossed.
 */
export interface VectorIndex {
  /** The highest `topK` one query may ask for, when the backend has one. */
  readonly maxTopK?: number
  /** Adds entries, replacing any with the same id. */
  upsert(entries: VectorEntry[]): Promise<void>
  query(vector: ArrayLike<number>, options: VectorQueryOptions): Promise<VectorMatch[]>
  remove?(ids: string[]): Promise<void>
}

/**
 * Whether a vector's metadata lies inside a filter.
 * @example matchesFilter({ run_id: 'r1', instance_id: 'global', kind: 'analysis', step: 0 }, { run_id: 'r1', kinds:
 *   ['analysis'] }) // true
 */
export function matchesFilter(
  metadata: Pick<VectorMetadata, 'run_id' | 'instance_id' | 'kind'>,
  filter: VectorFilter,
): boolean {
  return (
    metadata.run_id === filter.run_id &&
    (filter.instance_id === undefined || metadata.instance_id === filter.instance_id) &&
    (filter.kinds === undefined || filter.kinds.includes(metadata.kind))
  )
}
