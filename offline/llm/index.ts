/** The offline LLM layer: the endpoint pool over OpenAI-compatible servers and the persistent reply cache. */
export { EndpointPool, PoolError } from './pool.ts'
export type {
  EndpointPoolOptions,
  EndpointUsage,
  PoolEvent,
  PoolRequest,
  PoolUsage,
  RoleUsage,
  SamplingSettings,
} from './pool.ts'
export { CACHE_FILE, CachedChatModel } from './cache.ts'
export type { CacheStats } from './cache.ts'
export {
  EndpointConfig,
  EndpointConfigError,
  endpointsFromFlags,
  loadEndpointsFile,
  parseEndpointFlag,
  parseEndpoints,
} from './endpoints.ts'
