import { and, desc, eq, inArray, lte, type SQL } from 'drizzle-orm'
import { drizzle } from 'drizzle-orm/d1'
import { LRUCache } from 'lru-cache'
import { memoryDocuments } from '../../src/db/schema.ts'
import { sha256Hex } from '../../src/hash/index.ts'
import type { Embedder } from '../../src/memory/embedder.ts'
import type { VectorIndex } from '../../src/memory/vector-index.ts'
import type { MemoryDocument, MemoryKind } from '../../src/schemas/memory.ts'

export interface MemoryFilter {
  run_id: string
  instance_id?: string
  kind?: MemoryKind
  step?: number
  limit?: number
}

/** The subject of a step-level document (a step's summary or rubric update), as opposed to a rollout or a chunk. */
export const STEP_SUBJECT = 'step'

/**
 * Query vectors already embedded, by embedder and text: the same search asked again (a dashboard reload, a client's
 * retry, a token repeating itself) embeds nothing and spends no budget. Resolved vectors only, so no request waits on
 * another's embedding call; at most 2,000 characters a key (MemorySearchParam), so 512 of them stay a few MB.
 */
const queryVectors = new LRUCache<string, Float32Array>({ max: 512 })

/** D1 binds at most 100 parameters per statement; a memory row binds 9. */
const ROWS_PER_INSERT = 10

/**
 * Long-term memory: documents in D1 (the source of truth) mirrored as vectors in the index for search.
 * Writes are idempotent: a document id is derived from what it is about, and D1 ignores a second insert.
 * @example const memory = new MemoryStore(env.DB, embedder, index); await memory.put([doc])
 */
export class MemoryStore {
  constructor(
    private readonly db: D1Database,
    private readonly embedder: Embedder,
    private readonly index: VectorIndex,
  ) {}

  /**
   * The id of the document of `kind` about `subject` (a rollout id, or nothing for a step-level document).
   * @example await MemoryStore.documentId('analysis', 'grpo-1', 'global', 3, 'r17')
   */
  static async documentId(
    kind: MemoryKind,
    runId: string,
    instanceId: string,
    step: number,
    subject = '',
  ): Promise<string> {
    return `m-${(await sha256Hex([kind, runId, instanceId, step, subject].join('\u0000'))).slice(0, 40)}`
  }

  /** Stores documents and their vectors; documents already stored are left as they are. */
  async put(documents: MemoryDocument[]): Promise<void> {
    if (documents.length === 0) return
    const orm = drizzle(this.db)
    const rows = documents.map((doc) => ({
      id: doc.id,
      runId: doc.run_id,
      instanceId: doc.instance_id,
      kind: doc.kind,
      step: doc.step,
      subject: typeof doc.data.subject === 'string' ? doc.data.subject : null,
      text: doc.text,
      data: doc.data,
      createdAt: doc.created_at,
    }))
    const inserts = []
    for (let start = 0; start < rows.length; start += ROWS_PER_INSERT) {
      inserts.push(
        orm
          .insert(memoryDocuments)
          .values(rows.slice(start, start + ROWS_PER_INSERT))
          .onConflictDoNothing(),
      )
    }
    const [first, ...rest] = inserts
    await orm.batch([first!, ...rest])
    const vectors = await this.embedder.embed(documents.map((doc) => doc.text))
    await this.index.upsert(
      documents.map((doc, i) => ({
        id: doc.id,
        vector: vectors[i]!,
        metadata: { run_id: doc.run_id, instance_id: doc.instance_id, kind: doc.kind, step: doc.step },
      })),
    )
  }

  /** Documents by id, in the order asked; unknown ids are skipped. */
  async get(ids: readonly string[]): Promise<MemoryDocument[]> {
    if (ids.length === 0) return []
    const found = new Map<string, MemoryDocument>()
    for (let start = 0; start < ids.length; start += 90) {
      const rows = await drizzle(this.db)
        .select()
        .from(memoryDocuments)
        .where(inArray(memoryDocuments.id, ids.slice(start, start + 90)))
        .all()
      for (const row of rows) found.set(row.id, toDocument(row))
    }
    return ids.flatMap((id) => found.get(id) ?? [])
  }

  /** Documents matching the filter, newest step first. */
  async list(filter: MemoryFilter): Promise<MemoryDocument[]> {
    const conditions: SQL[] = [eq(memoryDocuments.runId, filter.run_id)]
    if (filter.instance_id !== undefined) conditions.push(eq(memoryDocuments.instanceId, filter.instance_id))
    if (filter.kind !== undefined) conditions.push(eq(memoryDocuments.kind, filter.kind))
    if (filter.step !== undefined) conditions.push(eq(memoryDocuments.step, filter.step))
    const rows = await drizzle(this.db)
      .select()
      .from(memoryDocuments)
      .where(and(...conditions))
      .orderBy(desc(memoryDocuments.step), desc(memoryDocuments.createdAt))
      .limit(filter.limit ?? 100)
      .all()
    return rows.map(toDocument)
  }

  /**
   * Static memory: the step summaries of the last `steps` steps up to `step`, oldest first. A step's
   * summary is its batch summary, or its meta summary when the step was summarised in chunks.
   */
  async recentSummaries(
    runId: string,
    instanceId: string | undefined,
    step: number,
    steps: number,
  ): Promise<MemoryDocument[]> {
    if (steps === 0) return []
    const conditions: SQL[] = [
      eq(memoryDocuments.runId, runId),
      inArray(memoryDocuments.kind, ['batch_summary', 'meta_summary']),
      eq(memoryDocuments.subject, STEP_SUBJECT),
      lte(memoryDocuments.step, step),
    ]
    if (instanceId !== undefined) conditions.push(eq(memoryDocuments.instanceId, instanceId))
    // One step-level summary per (instance, step), so `steps` rows are `steps` steps.
    const rows = await drizzle(this.db)
      .select()
      .from(memoryDocuments)
      .where(and(...conditions))
      .orderBy(desc(memoryDocuments.step))
      .limit(steps)
      .all()
    return rows.map(toDocument).reverse()
  }

  /**
   * Semantic search within a run (and an instance), best first, with similarity scores. The routes bound the text's
   * length (`MemorySearchParam`) before it reaches here. A text searched lately reuses its vector; otherwise `spend`
   * runs first (the caller's budget, which may refuse) and the text is embedded.
   */
  async search(
    query: {
      run_id: string
      instance_id?: string
      kinds?: MemoryKind[]
      text: string
      top_k: number
    },
    spend: () => Promise<void> = async () => {},
  ): Promise<(MemoryDocument & { similarity: number })[]> {
    const key = `${this.embedder.id}\u0000${query.text}`
    let vector = queryVectors.get(key)
    if (!vector) {
      await spend()
      ;[vector] = await this.embedder.embed([query.text])
      queryVectors.set(key, vector!)
    }
    const matches = await this.index.query(vector!, {
      topK: Math.min(query.top_k, this.index.maxTopK ?? query.top_k),
      filter: {
        run_id: query.run_id,
        ...(query.instance_id ? { instance_id: query.instance_id } : {}),
        ...(query.kinds ? { kinds: query.kinds } : {}),
      },
    })
    const documents = await this.get(matches.map((match) => match.id))
    const similarity = new Map(matches.map((match) => [match.id, match.score]))
    return documents.map((doc) => ({ ...doc, similarity: similarity.get(doc.id) ?? 0 }))
  }
}

function toDocument(row: typeof memoryDocuments.$inferSelect): MemoryDocument {
  return {
    id: row.id,
    run_id: row.runId,
    instance_id: row.instanceId,
    kind: row.kind as MemoryKind,
    step: row.step,
    text: row.text,
    data: row.data as Record<string, unknown>,
    created_at: row.createdAt,
  }
}
