import type { MemoryDocument, MemoryHit, MemoryScope } from '../schemas/memory.ts'
import type { Embedder } from './embedder.ts'
import { matchesFilter, type VectorIndex, type VectorMatch } from './vector-index.ts'

/** The most candidates one query asks an index without a `maxTopK` for. */
const MAX_CANDIDATES = 1_000

export interface RetrieveMemoriesInput {
  /**
   * Always shown: the last `static_memory_steps` batch summaries, oldest first. Documents outside `scope` are dropped.
   */
  static: MemoryDocument[]
  /** What the query generator asked for; blank and repeated queries are skipped. */
  queries: string[]
  /** The run (and instance, in per_instance mode) searched; `kinds` narrows the dynamic hits. */
  scope: MemoryScope
  /** `dynamic_memory_limit_per_query`: new documents each query may add. */
  limitPerQuery: number
  embedder: Embedder
  index: VectorIndex
  /**
   * Reads documents by id from the source of truth (D1); ids it does not return are skipped (deleted, or not yet
   * consistent).
   */
  loadDocuments(ids: string[]): Promise<MemoryDocument[]>
}

export interface RetrievedMemories {
  static: MemoryDocument[]
  /** One entry per distinct query, with the hits it added, best first. */
  perQuery: { query: string; hits: MemoryHit[] }[]
  /** The documents of all hits, each once: by query order, then rank. */
  dynamic: MemoryDocument[]
}

/**
 * Hybrid retrieval for the updater: the static documents, plus per query the top `limitPerQuery` vector hits
 * inside `scope` that are neither static nor found by an earlier query. Every hit is checked against its
 * document, so a lagging or misbehaving index can never leak another run's or instance's memory. Ties rank by
 * id, so equal inputs give equal output. A query left short by documents the store no longer has asks the index
 * again for more. Performs no I/O of its own: the embedder, index and loader do.
 * @example const memories = await retrieveMemories({ static: summaries, queries, scope: { run_id, instance_id },
 *   limitPerQuery: 3, embedder, index, loadDocuments: (ids) => store.byIds(ids) })
 */
export async function retrieveMemories(input: RetrieveMemoriesInput): Promise<RetrievedMemories> {
  const { scope, limitPerQuery, embedder, index } = input
  const fixed = uniqueById(
    input.static.filter((doc) => matchesFilter(doc, { run_id: scope.run_id, instance_id: scope.instance_id })),
  )
  const queries = [...new Set(input.queries.map((query) => query.trim()).filter((query) => query !== ''))]
  const limit = Math.max(0, Math.floor(limitPerQuery))
  if (queries.length === 0 || limit === 0)
    return { static: fixed, perQuery: queries.map((query) => ({ query, hits: [] })), dynamic: [] }

  const vectors = await embedder.embed(queries)
  const cap = index.maxTopK ?? MAX_CANDIDATES
  // Query j may lose the static documents and the hits of the queries before it to de-duplication: ask for that many
  // more.
  const asked = vectors.map((_, j) => Math.min(cap, limit * (j + 1) + fixed.length))
  // A query with nothing to embed (all zero) is as close to every document as to none: it finds nothing.
  const blank = vectors.map((vector) => vector.every((value) => value === 0))
  const search = async (j: number) => (blank[j] ? [] : index.query(vectors[j]!, { topK: asked[j]!, filter: scope }))
  const matches = await Promise.all(vectors.map((_, j) => search(j)))
  const documents = new Map<string, MemoryDocument | null>()
  for (;;) {
    const picks = pickHits(matches, fixed, limit, documents)
    const unknown = [...new Set(picks.flat().map((match) => match.id))].filter((id) => !documents.has(id))
    if (unknown.length > 0) {
      for (const doc of await input.loadDocuments(unknown)) {
        if (unknown.includes(doc.id)) documents.set(doc.id, matchesFilter(doc, scope) ? doc : null)
      }
      for (const id of unknown) if (!documents.has(id)) documents.set(id, null)
      continue
    }
    // A query left short by missing documents, whose index may hold more, asks again for twice as many.
    const short = picks.flatMap((picked, j) =>
      !blank[j] && picked.length < limit && matches[j]!.length >= asked[j]! && asked[j]! < cap ? [j] : [],
    )
    if (short.length === 0) return assemble(queries, picks, fixed, documents)
    await Promise.all(
      short.map(async (j) => {
        asked[j] = Math.min(cap, asked[j]! * 2)
        matches[j] = await search(j)
      }),
    )
  }
}

/** Per query, the best matches not yet taken, skipping documents known to be missing or outside the scope. */
function pickHits(
  matches: VectorMatch[][],
  fixed: MemoryDocument[],
  limit: number,
  documents: Map<string, MemoryDocument | null>,
): VectorMatch[][] {
  const taken = new Set(fixed.map((doc) => doc.id))
  return matches.map((ranked) => {
    const picked: VectorMatch[] = []
    for (const match of ranked) {
      if (picked.length === limit) break
      if (taken.has(match.id) || documents.get(match.id) === null) continue
      taken.add(match.id)
      picked.push(match)
    }
    return picked
  })
}

function assemble(
  queries: string[],
  picks: VectorMatch[][],
  fixed: MemoryDocument[],
  documents: Map<string, MemoryDocument | null>,
): RetrievedMemories {
  const dynamic: MemoryDocument[] = []
  const perQuery = queries.map((query, j) => ({
    query,
    hits: picks[j]!.map(({ id, score }): MemoryHit => {
      const doc = documents.get(id)!
      dynamic.push(doc)
      return { document_id: id, score, kind: doc.kind, step: doc.step, instance_id: doc.instance_id }
    }),
  }))
  return { static: fixed, perQuery, dynamic }
}

function uniqueById(docs: MemoryDocument[]): MemoryDocument[] {
  const seen = new Set<string>()
  return docs.filter((doc) => !seen.has(doc.id) && seen.add(doc.id))
}
