/** The offline LLM layer: the endpoint pool over OpenAI-compatible servers and the persistent reply cache. */
export { EndpointPool, PoolError } from './pool.ts'
export type {
  CallCounters,
  EndpointPoolOptions,
  EndpointUsage,
  FailureKind,
  PoolEvent,
  PoolRequest,
  PoolResponse,
  PoolUsage,
  RoleUsage,
  SamplingSettings,
} from './pool.ts'
export { CACHE_FILE, CachedChatModel } from './cache.ts'
export type { CachedChatModelOptions, CachedResponse, CacheStats } from './cache.ts'
export {
  EndpointConfig,
  EndpointConfigError,
  endpointsFromFlags,
  loadEndpointsFile,
  parseEndpointFlag,
  parseEndpoints,
} from './endpoints.ts'
export type { EndpointConfigInput } from './endpoints.ts'
export { responseFormatFor } from './response-format.ts'
export type { JsonSchemaFormat } from './response-format.ts'
export type { RequestExtras, ResponseFormat } from '../../src/llm/openai.ts'
