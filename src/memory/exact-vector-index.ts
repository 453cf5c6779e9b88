import { MemoryKind } from '../schemas/memory.ts'
import { TopK } from './top-k.ts'
import type { VectorEntry, VectorIndex, VectorMatch, VectorMetadata, VectorQueryOptions } from './vector-index.ts'
import { quantizeVector, serializeVector, vectorCodes } from './vector-codec.ts'
import { normalizeVector } from './vector-math.ts'

/** One vector as a Durable Object keeps it in SQLite: metadata columns plus `serializeVector` bytes. */
export interface StoredVectorRow extends VectorMetadata {
  id: string
  vector: Uint8Array | ArrayBuffer
}

const KIND_CODES = new Map(MemoryKind.options.map((kind, code) => [kind, code]))

/**
 * An exact cosine index in memory, meant to live inside a Durable Object (one per run) that persists
 * `storedVectorRow(entry)` in its SQLite and rebuilds the index with `load(rows)` on start. Vectors are
 * kept as int8 in one growing Int8Array (d bytes each), filter columns in parallel typed arrays, and a
 * query scans the rows of its run with a bounded heap. Scores are exact cosines of the quantised vectors.
 * @example const index = new ExactVectorIndex({ dimensions: 256 }); await index.upsert([{ id: 'm-1', vector, metadata:
 *   { run_id: 'r1', instance_id: 'global', kind: 'analysis', step: 0 } }])
 */
export class ExactVectorIndex implements VectorIndex {
  readonly dimensions: number
  #capacity: number
  #size = 0
  #codes: Int8Array
  /** 1 / |codes| per row (0 for an all-zero vector), so a dot product becomes a cosine. */
  #inverseNorms: Float64Array
  #runs: Int32Array
  #instances: Int32Array
  #kinds: Uint8Array
  #steps: Int32Array
  #ids: string[] = []
  readonly #rowOf = new Map<string, number>()
  /** Run and instance ids as small integers, so the filter compares numbers. */
  readonly #symbols = new Map<string, number>()

  constructor(options: { dimensions: number; capacity?: number }) {
    if (!Number.isInteger(options.dimensions) || options.dimensions < 1)
      throw new RangeError(`dimensions must be a positive integer, got ${options.dimensions}`)
    this.dimensions = options.dimensions
    this.#capacity = Math.max(16, options.capacity ?? 1_024)
    this.#codes = new Int8Array(this.#capacity * this.dimensions)
    this.#inverseNorms = new Float64Array(this.#capacity)
    this.#runs = new Int32Array(this.#capacity)
    this.#instances = new Int32Array(this.#capacity)
    this.#kinds = new Uint8Array(this.#capacity)
    this.#steps = new Int32Array(this.#capacity)
  }

  /** How many vectors the index holds. */
  get size(): number {
    return this.#size
  }

  async upsert(entries: VectorEntry[]): Promise<void> {
    for (const entry of entries) {
      if (entry.vector.length !== this.dimensions)
        throw new RangeError(`vector ${entry.id} has ${entry.vector.length} dimensions, the index ${this.dimensions}`)
      this.#put(entry.id, quantizeVector(entry.vector), entry.metadata)
    }
  }

  /**
   * Adds stored rows (from `storedVectorRow`) without re-quantising; later rows replace earlier ones with the same id.
   * @example index.load(ctx.storage.sql.exec('SELECT * FROM vectors').toArray() as StoredVectorRow[])
   */
  load(rows: Iterable<StoredVectorRow>): void {
    for (const row of rows) {
      const codes = vectorCodes(row.vector)
      if (codes.length !== this.dimensions)
        throw new RangeError(
          `stored vector ${row.id} has ${codes.length} bytes, the index ${this.dimensions} dimensions`,
        )
      this.#put(row.id, codes, row)
    }
  }

  async query(vector: ArrayLike<number>, options: VectorQueryOptions): Promise<VectorMatch[]> {
    return this.search(vector, options)
  }

  /**
   * The synchronous form of `query`, for callers inside a Durable Object.
   * @example index.search(queryVector, { topK: 5, filter: { run_id: 'r1', instance_id: 'in-3f1c' } })
   */
  search(vector: ArrayLike<number>, { topK, filter }: VectorQueryOptions): VectorMatch[] {
    if (vector.length !== this.dimensions)
      throw new RangeError(`the query has ${vector.length} dimensions, the index ${this.dimensions}`)
    const run = this.#symbols.get(filter.run_id)
    const instance = filter.instance_id === undefined ? -1 : this.#symbols.get(filter.instance_id)
    if (run === undefined || instance === undefined || topK < 1) return []
    let kindMask = 0
    for (const kind of filter.kinds ?? MemoryKind.options) kindMask |= 1 << KIND_CODES.get(kind)!
    const query = normalizeVector(vector)
    const ids = this.#ids
    const top = new TopK(Math.min(Math.floor(topK), this.#size), (a, b) =>
      ids[a]! < ids[b]! ? -1 : ids[a]! > ids[b]! ? 1 : 0,
    )
    const codes = this.#codes
    const dimensions = this.dimensions
    for (let row = 0; row < this.#size; row++) {
      if (
        this.#runs[row] !== run ||
        (instance !== -1 && this.#instances[row] !== instance) ||
        !((kindMask >> this.#kinds[row]!) & 1)
      )
        continue
      let dot = 0
      for (let i = 0, offset = row * dimensions; i < dimensions; i++, offset++) dot += codes[offset]! * query[i]!
      top.push(dot * this.#inverseNorms[row]!, row)
    }
    return top.sorted().map(({ item, score }) => ({ id: ids[item]!, score }))
  }

  async remove(ids: string[]): Promise<void> {
    for (const id of ids) {
      const row = this.#rowOf.get(id)
      if (row === undefined) continue
      const last = --this.#size
      if (row !== last) this.#moveRow(last, row)
      this.#rowOf.delete(id)
      this.#ids.pop()
    }
  }

  /**
   * What the index holds and the bytes of its typed arrays (ids and the symbol table come on top).
   * @example index.stats() // { size: 10000, capacity: 16384, dimensions: 256, bytes: 4587520 }
   */
  stats(): { size: number; capacity: number; dimensions: number; bytes: number } {
    const arrays = [this.#codes, this.#inverseNorms, this.#runs, this.#instances, this.#kinds, this.#steps]
    return {
      size: this.#size,
      capacity: this.#capacity,
      dimensions: this.dimensions,
      bytes: arrays.reduce((sum, array) => sum + array.byteLength, 0),
    }
  }

  #put(id: string, codes: Int8Array, metadata: VectorMetadata): void {
    const kind = KIND_CODES.get(metadata.kind)
    if (kind === undefined) throw new RangeError(`vector ${id} has an unknown kind "${metadata.kind}"`)
    let row = this.#rowOf.get(id)
    if (row === undefined) {
      if (this.#size === this.#capacity) this.#grow()
      row = this.#size++
      this.#rowOf.set(id, row)
      this.#ids[row] = id
    }
    this.#codes.set(codes, row * this.dimensions)
    let sum = 0
    for (let i = 0; i < codes.length; i++) sum += codes[i]! * codes[i]!
    this.#inverseNorms[row] = sum > 0 ? 1 / Math.sqrt(sum) : 0
    this.#runs[row] = this.#symbol(metadata.run_id)
    this.#instances[row] = this.#symbol(metadata.instance_id)
    this.#kinds[row] = kind
    this.#steps[row] = metadata.step
  }

  #symbol(value: string): number {
    let symbol = this.#symbols.get(value)
    if (symbol === undefined) this.#symbols.set(value, (symbol = this.#symbols.size))
    return symbol
  }

  /** Moves row `from` into row `to` (to fill the hole a removal left). */
  #moveRow(from: number, to: number): void {
    const d = this.dimensions
    this.#codes.copyWithin(to * d, from * d, (from + 1) * d)
    for (const column of [this.#inverseNorms, this.#runs, this.#instances, this.#kinds, this.#steps])
      column[to] = column[from]!
    const id = this.#ids[from]!
    this.#ids[to] = id
    this.#rowOf.set(id, to)
  }

  #grow(): void {
    this.#capacity *= 2
    const grown = <T extends Int8Array | Uint8Array | Int32Array | Float64Array>(
      array: T,
      make: (length: number) => T,
      width = 1,
    ): T => {
      const next = make(this.#capacity * width)
      next.set(array)
      return next
    }
    this.#codes = grown(this.#codes, (n) => new Int8Array(n), this.dimensions)
    this.#inverseNorms = grown(this.#inverseNorms, (n) => new Float64Array(n))
    this.#runs = grown(this.#runs, (n) => new Int32Array(n))
    this.#instances = grown(this.#instances, (n) => new Int32Array(n))
    this.#kinds = grown(this.#kinds, (n) => new Uint8Array(n))
    this.#steps = grown(this.#steps, (n) => new Int32Array(n))
  }
}

/**
 * The row a Durable Object persists for an entry; `load` turns it back into exactly the indexed vector.
 * @example const row = storedVectorRow(entry); sql.exec('INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?, ?, ?)',
 *   row.id, row.run_id, row.instance_id, row.kind, row.step, row.vector.buffer)
 */
export function storedVectorRow(entry: VectorEntry): StoredVectorRow & { vector: Uint8Array } {
  return { id: entry.id, ...entry.metadata, vector: serializeVector(entry.vector) }
}
