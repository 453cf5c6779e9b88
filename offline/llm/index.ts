/** The offline LLM layer: the endpoint pool over OpenAI-compatible servers and the persistent reply cache. */
export { EndpointPool, PoolError } from './pool.ts'
export type { CallCounters, EndpointPoolOptions, EndpointUsage, FailureKind, PoolEvent, PoolRequest, PoolResponse, PoolUsage, RoleUsage, SamplingSettings } from './pool.ts'
export { CACHE_FILE, CachedChatModel } from './cache.ts'
export type { CachedChatModelOptions, CachedResponse, CacheStats } from './cache.ts'
export { EndpointConfig, EndpointConfigError, endpointsFromFlags, loadEndpointsFile, parseEndpointFlag, parseEndpoints } from './endpoints.ts'
export type { EndpointConfigInput } from './endpoints.ts'
export { ExtendedOpenAIChatModel, responseFormatFor } from './transport.ts'
export type { JsonSchemaFormat, RequestExtras, ResponseFormat } from './transport.ts'
