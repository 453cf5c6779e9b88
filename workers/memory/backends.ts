import { HashedNgramEmbedder } from '../../src/memory/hashed-ngram-embedder.ts'
import type { Embedder } from '../../src/memory/embedder.ts'
import type { VectorIndex } from '../../src/memory/vector-index.ts'
import { VectorizeIndex } from '../../src/memory/vectorize-index.ts'
import { WorkersAiEmbedder } from '../../src/memory/workers-ai-embedder.ts'
import { memoryIndexName } from '../../durable-objects/names.ts'
import type { Env } from '../env.ts'
import { MemoryStore } from './store.ts'

/**
 * The embedder the deployment is configured for: `EMBEDDER=workers-ai` in production, else the
 * deterministic hashed n-gram embedder (no network, no account).
 * @example const embedder = embedderFor(env)
 */
export function embedderFor(env: Env): Embedder {
  if (env.EMBEDDER === 'workers-ai') {
    if (!env.AI) throw new Error('EMBEDDER=workers-ai needs the AI binding')
    return new WorkersAiEmbedder(env.AI)
  }
  return new HashedNgramEmbedder()
}

/**
 * The vector index for one run: Vectorize when `VECTOR_BACKEND=vectorize`, else the run's MemoryIndex
 * Durable Object. Selected by configuration, never by probing the binding (it exists locally and only throws).
 * @example const index = vectorIndexFor(env, 'grpo-1')
 */
export function vectorIndexFor(env: Env, runId: string): VectorIndex {
  if (env.VECTOR_BACKEND === 'vectorize') {
    if (!env.VECTORS) throw new Error('VECTOR_BACKEND=vectorize needs the VECTORS binding')
    return new VectorizeIndex(env.VECTORS)
  }
  const stub = env.MEMORY_INDEX.getByName(memoryIndexName(runId))
  return {
    upsert: (entries) => stub.upsert(entries.map((entry) => ({ ...entry, vector: Float32Array.from(entry.vector) }))),
    query: (vector, options) => stub.query(Float32Array.from(vector), options),
  }
}

/**
 * The memory of one run, wired to this deployment's D1, embedder and index.
 * @example await memoryFor(env, 'grpo-1').search({ run_id: 'grpo-1', text: 'hacking', top_k: 5 })
 */
export function memoryFor(env: Env, runId: string): MemoryStore {
  return new MemoryStore(env.DB, embedderFor(env), vectorIndexFor(env, runId))
}
