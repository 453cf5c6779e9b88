/** The offline LLM layer: the endpoint pool over OpenAI-compatible servers and the persistent reply cache. */
export { EndpointPool } from './pool.ts'
export type {
  EndpointUsage,
  PoolRequest,
  RoleUsage,
  SamplingSettings,
} from './pool.ts'

export { CachedChatModel } from './cache.ts'
export type { CacheStats } from './cache.ts'

export {
  EndpointConfig,
  EndpointConfigError,
  endpointsFromFlags,
  loadEndpointsFile,
  parseEndpointFlag,
  parseEndpoints,
} from './endpoints.ts'
