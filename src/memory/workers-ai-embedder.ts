import { LlmError } from '../llm/types.ts'
import type { WorkersAiBinding } from '../llm/workers-ai.ts'
import { chunk } from './chunk.ts'
import { readEmbeddings, type Embedder } from './embedder.ts'

/** Vector lengths of the Workers AI text embedding models, for when the caller does not say. */
const KNOWN_DIMENSIONS: Record<string, number> = {
  '@cf/baai/bge-small-en-v1.5': 384,
  '@cf/baai/bge-base-en-v1.5': 768,
  '@cf/baai/bge-large-en-v1.5': 1024,
  '@cf/baai/bge-m3': 1024,
}
/** The bge models take at most 100 texts per call. */
const BATCH_SIZE = 100

/**
 * Workers AI embeddings through the `AI` binding: `run(model, { text })` answers `{ data: number[][] }`.
 * Production only (the binding has no local simulator). Failures are `LlmError`s.
 * @example const embedder = new WorkersAiEmbedder(env.AI, '@cf/baai/bge-base-en-v1.5')
 */
export class WorkersAiEmbedder implements Embedder {
  readonly id: string
  readonly dimensions: number

  constructor(
    private readonly ai: WorkersAiBinding,
    private readonly model = '@cf/baai/bge-base-en-v1.5',
    dimensions?: number,
  ) {
    const known = dimensions ?? KNOWN_DIMENSIONS[model]
    if (known === undefined)
      throw new RangeError(`the vector length of ${model} is not known; pass it as the third argument`)
    this.dimensions = known
    this.id = `workers-ai:${model}:${known}`
  }

  async embed(texts: string[]): Promise<Float32Array[]> {
    const vectors: Float32Array[] = []
    for (const batch of chunk(texts, BATCH_SIZE)) {
      let reply: unknown
      try {
        reply = await this.ai.run(this.model, { text: batch })
      } catch (error) {
        throw new LlmError('server_error', `Workers AI embeddings failed: ${(error as Error).message}`)
      }
      vectors.push(
        ...readEmbeddings(
          (reply as { data?: unknown } | null)?.data,
          batch.length,
          this.dimensions,
          `Workers AI ${this.model}`,
        ),
      )
    }
    return vectors
  }
}
