export type { Embedder } from './embedder.ts'
export { readEmbeddings } from './embedder.ts'
export { HashedNgramEmbedder, hashedNgramVector } from './hashed-ngram-embedder.ts'
export { OpenAIEmbedder } from './openai-embedder.ts'
export type { OpenAIEmbedderSettings } from './openai-embedder.ts'
export { WorkersAiEmbedder } from './workers-ai-embedder.ts'
export type {
  VectorEntry,
  VectorFilter,
  VectorIndex,
  VectorMatch,
  VectorMetadata,
  VectorQueryOptions,
} from './vector-index.ts'
export { matchesFilter } from './vector-index.ts'
export { ExactVectorIndex, storedVectorRow } from './exact-vector-index.ts'
export type { StoredVectorRow } from './exact-vector-index.ts'
export { VectorizeIndex, VECTORIZE_LIMITS, indexedValue, vectorizeFilter } from './vectorize-index.ts'
export type { VectorizeBinding, VectorizeFilter } from './vectorize-index.ts'
export { deserializeVector, quantizeVector, serializeVector, vectorCodes, INT8_SCALE } from './vector-codec.ts'
export { dotProduct, normalizeInPlace, normalizeVector } from './vector-math.ts'
export { TopK } from './top-k.ts'
export { retrieveMemories } from './retrieval.ts'
export type { RetrievedMemories, RetrieveMemoriesInput } from './retrieval.ts'
export { formatMemoriesForPrompt } from './format-memories.ts'
export type { FormatMemoriesOptions } from './format-memories.ts'
export { MemoryDocument, MemoryHit, MemoryKind, MemoryQuery, MemoryScope } from '../schemas/memory.ts'
