import type { LimitFunction } from 'p-limit'
import { refuseLlmHost } from '../../src/llm/hosts.ts'
import { withRetry } from '../../src/llm/index.ts'
import { HashedNgramEmbedder } from '../../src/memory/hashed-ngram-embedder.ts'
import type { Embedder } from '../../src/memory/embedder.ts'
import { OpenAIEmbedder } from '../../src/memory/openai-embedder.ts'
import type { VectorIndex } from '../../src/memory/vector-index.ts'
import { VectorizeIndex } from '../../src/memory/vectorize-index.ts'
import { WorkersAiEmbedder } from '../../src/memory/workers-ai-embedder.ts'
import { memoryIndexName } from '../../durable-objects/names.ts'
import type { Env } from '../env.ts'
import { MemoryStore } from './store.ts'

/** What the Worker's embedder may share with the invocation's LLM calls. */
export interface EmbedderOptions {
  /** The invocation's cap on LLM connections (`requestModels(…).limit`): an embeddings request takes one slot. */
  limit?: LimitFunction
}

/** The vars `EMBEDDER=openai` reads; the API key is the secret `EMBEDDINGS_API_KEY`. */
const OPENAI_EMBEDDER_VARS = ['EMBEDDINGS_BASE_URL', 'EMBEDDINGS_MODEL', 'EMBEDDINGS_DIMENSIONS'] as const

/**
 * The embedder the deployment is configured for: `EMBEDDER=workers-ai` (the AI binding), `EMBEDDER=openai` (an
 * OpenAI-compatible `/embeddings`, retried on 429 and 5xx as its Retry-After asks), else the deterministic hashed
 * n-gram embedder (no network, no account). A remote embedder missing its binding or vars throws, naming them.
 * @example const embedder = embedderFor(env, { limit: models.limit })
 */
export function embedderFor(env: Env, options: EmbedderOptions = {}): Embedder {
  if (env.EMBEDDER === 'workers-ai') {
    if (!env.AI) throw new Error('EMBEDDER=workers-ai needs the AI binding')
    return new WorkersAiEmbedder(env.AI)
  }
  if (env.EMBEDDER === 'openai') return retrying(openAIEmbedderOf(env), options.limit)
  return new HashedNgramEmbedder()
}

function openAIEmbedderOf(env: Env): OpenAIEmbedder {
  const missing = OPENAI_EMBEDDER_VARS.filter((name) => !env[name]?.trim())
  if (missing.length > 0)
    throw new Error(`EMBEDDER=openai needs the var${missing.length > 1 ? 's' : ''} ${missing.join(', ')}`)
  const dimensions = Number(env.EMBEDDINGS_DIMENSIONS)
  if (!Number.isInteger(dimensions) || dimensions < 1)
    throw new Error(`EMBEDDINGS_DIMENSIONS must be a positive integer, got "${env.EMBEDDINGS_DIMENSIONS}"`)
  refuseLlmHost(env, env.EMBEDDINGS_BASE_URL!.trim(), 'EMBEDDINGS_BASE_URL')
  return new OpenAIEmbedder({
    baseURL: env.EMBEDDINGS_BASE_URL!.trim(),
    model: env.EMBEDDINGS_MODEL!.trim(),
    dimensions,
    requestDimensions: env.EMBEDDINGS_REQUEST_DIMENSIONS === 'true',
    ...(env.EMBEDDINGS_API_KEY ? { apiKey: env.EMBEDDINGS_API_KEY } : {}),
  })
}

/** Each attempt holds one of the invocation's LLM slots, released while `withRetry` waits. */
function retrying(embedder: Embedder, limit?: LimitFunction): Embedder {
  const attempt = (texts: string[]) => (limit ? limit(() => embedder.embed(texts)) : embedder.embed(texts))
  return {
    id: embedder.id,
    dimensions: embedder.dimensions,
    embed: (texts) => withRetry(() => attempt(texts)),
  }
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
export function memoryFor(env: Env, runId: string, options: EmbedderOptions = {}): MemoryStore {
  return new MemoryStore(env.DB, embedderFor(env, options), vectorIndexFor(env, runId))
}
