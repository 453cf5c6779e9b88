export { HashedNgramEmbedder } from './hashed-ngram-embedder.ts'
export { OpenAIEmbedder } from './openai-embedder.ts'

export { WorkersAiEmbedder } from './workers-ai-embedder.ts'
export type {
  VectorEntry,
  VectorIndex,
  VectorMetadata,
} from './vector-index.ts'

export { ExactVectorIndex, storedVectorRow } from './exact-vector-index.ts'

export { VectorizeIndex, indexedValue } from './vectorize-index.ts'
export type { VectorizeBinding } from './vectorize-index.ts'
export { deserializeVector, quantizeVector, serializeVector } from './vector-codec.ts'
export { dotProduct, normalizeVector } from './vector-math.ts'
export { TopK } from './top-k.ts'
export { retrieveMemories } from './retrieval.ts'
export type { RetrieveMemoriesInput } from './retrieval.ts'
export { formatMemoriesForPrompt } from './format-memories.ts'

export { MemoryDocument, MemoryKind, MemoryQuery } from '../schemas/memory.ts'
