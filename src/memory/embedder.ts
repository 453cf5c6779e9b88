import { LlmError } from '../llm/types.ts'
import { normalizeVector } from './vector-math.ts'

/**
 * The embedding port: text in, unit-length vectors out (all zero for a text with nothing to embed).
 * Adapters: `HashedNgramEmbedder` (local, deterministic, the default), `OpenAIEmbedder`, `WorkersAiEmbedder`.
 */
export interface Embedder {
  /** Backend, model and dimensions: vectors from embedders with different ids must never share an index. */
  readonly id: string
  readonly dimensions: number
  /** One vector per text, in the order given. */
  embed(texts: string[]): Promise<Float32Array[]>
}

/**
 * Checks a remote backend's raw vectors (count, length, finite numbers) and scales them to unit length.
 * @example const vectors = readEmbeddings(reply.data.map((item) => item.embedding), texts.length, 768, 'Workers AI')
 */
export function readEmbeddings(raw: unknown, count: number, dimensions: number, source: string): Float32Array[] {
  if (!Array.isArray(raw) || raw.length !== count) {
    throw new LlmError(
      'invalid_reply',
      `${source} returned ${Array.isArray(raw) ? raw.length : 'no'} embeddings for ${count} texts`,
    )
  }
  return raw.map((vector: unknown, index) => {
    if (
      !Array.isArray(vector) ||
      vector.length !== dimensions ||
      !vector.every((value) => typeof value === 'number' && Number.isFinite(value))
    ) {
      const length = Array.isArray(vector) ? vector.length : typeof vector
      throw new LlmError(
        'invalid_reply',
        `${source} embedding ${index} is not ${dimensions} finite numbers (got ${length})`,
      )
    }
    return normalizeVector(vector as number[])
  })
}
