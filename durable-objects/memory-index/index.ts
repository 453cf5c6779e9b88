import { DurableObject } from 'cloudflare:workers'
import { ExactVectorIndex, storedVectorRow, type StoredVectorRow } from '../../src/memory/exact-vector-index.ts'
import type { VectorEntry, VectorMatch, VectorQueryOptions } from '../../src/memory/vector-index.ts'
import { MetaStore } from '../meta-store.ts'
import { applySchema } from '../schema.ts'

/**
 * One per run: the exact cosine index of the run's memory, for local development and tests
 * (Vectorize has no local simulator). Rows persist in SQLite; the index is rebuilt in memory on start,
 * so a query is an in-memory scan (int8, one byte per dimension).
 */
export class MemoryIndex extends DurableObject<Cloudflare.Env> {
  private readonly sql: SqlStorage
  private readonly meta: MetaStore
  private index: ExactVectorIndex | undefined

  constructor(ctx: DurableObjectState, env: Cloudflare.Env) {
    super(ctx, env)
    this.sql = ctx.storage.sql
    this.meta = new MetaStore(this.sql)
    applySchema(this.sql, {
      vectors: {
        columns: {
          id: 'TEXT PRIMARY KEY',
          run_id: 'TEXT NOT NULL',
          instance_id: 'TEXT NOT NULL',
          kind: 'TEXT NOT NULL',
          step: 'INTEGER NOT NULL',
          vector: 'BLOB NOT NULL',
        },
      },
    })
    const dimensions = this.meta.get('dimensions')
    if (dimensions !== undefined) {
      this.index = new ExactVectorIndex({
        dimensions: Number(dimensions),
        capacity: this.sql.exec<{ n: number }>('SELECT count(*) AS n FROM vectors').one().n,
      })
      this.index.load(this.sql.exec<StoredVectorRow & Record<string, SqlStorageValue>>('SELECT * FROM vectors'))
    }
  }

  /** Adds or replaces vectors (persisted before the call returns). */
  async upsert(entries: VectorEntry[]): Promise<void> {
    if (entries.length === 0) return
    const index = (this.index ??= this.createIndex(entries[0]!.vector.length))
    await index.upsert(entries)
    for (const entry of entries) {
      const row = storedVectorRow(entry)
      this.sql.exec(
        'INSERT OR REPLACE INTO vectors (id, run_id, instance_id, kind, step, vector) VALUES (?, ?, ?, ?, ?, ?)',
        row.id,
        row.run_id,
        row.instance_id,
        row.kind,
        row.step,
        row.vector.buffer,
      )
    }
  }

  /** Best matches first, never outside the filter. */
  async query(vector: Float32Array, options: VectorQueryOptions): Promise<VectorMatch[]> {
    return this.index ? this.index.search(vector, options) : []
  }

  /** How many vectors and bytes the index holds. */
  async stats(): Promise<{ size: number; bytes: number }> {
    return this.index ? this.index.stats() : { size: 0, bytes: 0 }
  }

  private createIndex(dimensions: number): ExactVectorIndex {
    this.meta.set('dimensions', dimensions)
    return new ExactVectorIndex({ dimensions })
  }
}
