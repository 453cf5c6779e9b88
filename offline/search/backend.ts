/**
 * The models behind the four search roles. `mock`: the deterministic `MockChatModel` (autosr's heuristics through
 * the real request and parsing path). `openai`: an `EndpointPool` over OpenAI-compatible servers given by
 * `--endpoint` (repeatable), `--endpoints-file` or `--base-url`, with hard per-endpoint caps, health and bounded
 * retries. `auto` is openai when any endpoint is given, else mock.
 *
 * Per-role models: roles sharing a model share one pool. When roles use different models, each model gets its own
 * pool: an endpoint that pins a `model` serves only the roles using that model, and an endpoint without one is
 * shared, its `max_concurrency` split between the pools (so the endpoint's cap still holds across all of them).
 */
import { MockChatModel } from '../../src/llm/mock.ts'
import { LlmError, type ChatModel, type ChatRequest, type ChatResponse } from '../../src/llm/types.ts'
import type { SearchRoleName } from '../../src/search/roles/rubric.ts'
import {
  EndpointConfigError,
  endpointsFromFlags,
  EndpointPool,
  loadEndpointsFile,
  parseEndpoints,
  type EndpointConfig,
  type EndpointUsage,
  type RoleUsage,
} from '../llm/index.ts'
import { SearchInputError } from './errors.ts'
import { SEARCH_ROLES, type BackendChoice } from './roles.ts'

/** The mock model's name; its id (`mock:<name>`) keys the reply cache. */
export const MOCK_MODEL = 'mock-heuristic-1'

export interface BackendOptions {
  backend: BackendChoice
  endpoints: readonly string[]
  endpointsFile?: string
  baseUrl?: string
  apiKeyEnv?: string
  maxConcurrency: number
  model?: string
  models: Partial<Record<SearchRoleName, string>>
  temperature: number
  maxTokens: number | undefined
  timeoutMs: number
  maxAttempts: number
  /** Default sampling seed of requests that carry none. */
  seed: number
  mockNoise: number
  mockLatencyMs?: number
  /** Where `api_key_env` names are looked up; default `process.env`. */
  secrets?: Record<string, string | undefined>
}

/** An endpoint as run records show it: no key, only the name of the variable holding it. */
interface EndpointRecord {
  name: string
  base_url: string
  max_concurrency: number
  model: string | null
  api_key_env: string | null
  structured_output: EndpointConfig['structured_output']
  /** The roles this endpoint serves, and the share of its cap each pool got when it is shared. */
  serves: Array<{ roles: SearchRoleName[]; max_concurrency: number }>
}

/** What the pools report: HTTP attempts per role and per endpoint (merged over pools). */
interface PoolReport {
  roles: Record<string, RoleUsage>
  endpoints: Record<string, EndpointUsage>
  total: RoleUsage
}

export interface Backend {
  requested: BackendChoice
  resolved: 'mock' | 'openai'
  /** Per role, the model answering what the reply cache cannot. */
  models: Record<SearchRoleName, ChatModel>
  /** Per role, the model name for manifests. */
  modelNames: Record<SearchRoleName, string>
  endpoints: EndpointRecord[]
  /** Environment variables holding API keys the run needs (names only). */
  apiKeyEnvs: string[]
  /** Pool accounting, merged over pools; null on the mock backend. */
  poolUsage(): PoolReport | null
  close(): Promise<void>
}

/**
 * Resolves `--backend` and builds the per-role models. Configuration problems (no endpoint, a malformed
 * `--endpoint`, an unset key variable, no model name) are `SearchInputError`s naming the flag.
 * @example const backend = await createBackend({ backend: 'auto', endpoints: [], models: {}, maxConcurrency: 4,
 *   temperature: 0, maxTokens: 2048, timeoutMs: 60000, maxAttempts: 4, seed: 7, mockNoise: 0 })
 * backend.resolved // 'mock'
 */
export async function createBackend(options: BackendOptions): Promise<Backend> {
  const configs = await collectEndpoints(options)
  const resolved = options.backend === 'auto' ? (configs.length > 0 ? 'openai' : 'mock') : options.backend
  if (resolved === 'mock') return mockBackend(options)
  if (configs.length === 0)
    throw new SearchInputError('--backend openai needs --endpoint, --endpoints-file or --base-url')
  return openaiBackend(options, configs)
}

async function collectEndpoints(options: BackendOptions): Promise<EndpointConfig[]> {
  const configs: EndpointConfig[] = []
  try {
    if (options.endpointsFile) configs.push(...(await loadEndpointsFile(options.endpointsFile)))
    if (options.endpoints.length > 0) configs.push(...endpointsFromFlags(options.endpoints, options.maxConcurrency))
    if (options.baseUrl) {
      configs.push(
        ...parseEndpoints([{ base_url: options.baseUrl, max_concurrency: options.maxConcurrency }], '--base-url'),
      )
    }
    const withKeys = configs.map((config) =>
      config.api_key_env || !options.apiKeyEnv ? config : { ...config, api_key_env: options.apiKeyEnv },
    )
    return configs.length === 0 ? [] : parseEndpoints(withKeys, 'endpoints (--endpoint, --endpoints-file, --base-url)')
  } catch (error) {
    if (error instanceof EndpointConfigError) throw new SearchInputError(error.message)
    throw error
  }
}

function mockBackend(options: BackendOptions): Backend {
  // The noise changes the mock's answers but not the request text: it is part of the model's id, so of every cache key.
  const name = options.mockNoise > 0 ? `${MOCK_MODEL}+noise=${options.mockNoise}` : MOCK_MODEL
  const mock: ChatModel = new MockChatModel(name)
  // The mock samples: its proposer draws what it proposes from each request's seed, as a model above temperature 0
  // would. It declares no sampling settings, so the reply cache keys on that seed (a greedy model's cache would answer
  // a question asked again from its first answer, whatever the seed): a run finds the same rubrics with the cache or
  // without, and runs with other seeds never take each other's proposals from one cache.
  const model: ChatModel = options.mockLatencyMs ? withLatency(mock, options.mockLatencyMs) : mock
  return {
    requested: options.backend,
    resolved: 'mock',
    models: Object.fromEntries(SEARCH_ROLES.map((role) => [role, model])) as Record<SearchRoleName, ChatModel>,
    modelNames: Object.fromEntries(SEARCH_ROLES.map((role) => [role, name])) as Record<SearchRoleName, string>,
    endpoints: [],
    apiKeyEnvs: [],
    poolUsage: () => null,
    close: async () => undefined,
  }
}

/** One pool to open: a model, the roles it answers, and the endpoints (or shares of them) it may use. */
interface PoolPlan {
  model: string | undefined
  roles: SearchRoleName[]
  endpoints: EndpointConfig[]
}

/** The openai backend: one endpoint pool per model the roles use, endpoints shared between pools by cap. */
function openaiBackend(options: BackendOptions, configs: EndpointConfig[]): Backend {
  const groups = rolesByModel(options)
  const records: EndpointRecord[] = configs.map((config) => ({
    name: config.name ?? config.base_url,
    base_url: config.base_url,
    max_concurrency: config.max_concurrency,
    model: config.model ?? null,
    api_key_env: config.api_key_env ?? null,
    structured_output: config.structured_output,
    serves: [],
  }))
  const plans = planPools(groups, configs, records)
  const pools: EndpointPool[] = []
  const models = {} as Record<SearchRoleName, ChatModel>
  const modelNames = {} as Record<SearchRoleName, string>
  for (const plan of plans) {
    const pool = openPool(plan, options)
    pools.push(pool)
    const name = plan.model ?? [...new Set(plan.endpoints.map((endpoint) => endpoint.model!))].sort().join('+')
    for (const role of plan.roles) {
      models[role] = pool
      modelNames[role] = name
    }
  }

  return {
    requested: options.backend,
    resolved: 'openai',
    models,
    modelNames,
    endpoints: records,
    apiKeyEnvs: [...new Set(configs.flatMap((config) => (config.api_key_env ? [config.api_key_env] : [])))],
    poolUsage: () => mergePoolUsage(pools, records),
    close: async () => {
      await Promise.all(pools.map((pool) => pool.close()))
    },
  }
}

/** The roles of each model (per-role models, else the default); a role without any model is refused. */
function rolesByModel(options: BackendOptions): Map<string | undefined, SearchRoleName[]> {
  const roleModel = (role: SearchRoleName) => options.models[role] ?? options.model
  const groups = new Map<string | undefined, SearchRoleName[]>()
  for (const role of SEARCH_ROLES) {
    const model = roleModel(role)
    groups.set(model, [...(groups.get(model) ?? []), role])
  }
  if (groups.size > 1 && groups.has(undefined)) {
    const roles = groups.get(undefined)!
    throw new SearchInputError(
      `--model: roles use different models, so give a default --model (or --model-${roles[0]}) for ${roles.join(', ')}`,
    )
  }

  return groups
}

/**
 * Which endpoints each model's pool uses: all of them with one model; else the endpoints pinning that model, and
 * a share of the cap of every endpoint pinning none. Fills each record's `serves`.
 */
function planPools(
  groups: Map<string | undefined, SearchRoleName[]>,
  configs: EndpointConfig[],
  records: EndpointRecord[],
): PoolPlan[] {
  const plans = [...groups].map(([model, roles]) => ({ model, roles, endpoints: [] as EndpointConfig[] }))
  if (plans.length === 1) {
    plans[0]!.endpoints = configs
    for (const record of records)
      record.serves.push({ roles: plans[0]!.roles, max_concurrency: record.max_concurrency })
  } else {
    configs.forEach((config, index) => {
      const record = records[index]!
      if (config.model !== undefined) {
        const plan = plans.find((candidate) => candidate.model === config.model)
        if (plan) {
          plan.endpoints.push(config)
          record.serves.push({ roles: plan.roles, max_concurrency: config.max_concurrency })
        }
        return
      }
      // Shared by every model: split the cap so the pools together never exceed it.
      if (config.max_concurrency < plans.length) {
        throw new SearchInputError(
          `endpoint ${record.name}: max_concurrency ${config.max_concurrency} cannot be shared by the ` +
            `${plans.length} ` +
            `role models (${plans.map((plan) => `${plan.roles.join('/')}: ${plan.model}`).join('; ')}); raise it to ` +
            `at least ${plans.length}, or pin a model per endpoint`,
        )
      }
      plans.forEach((plan, position) => {
        const share =
          Math.floor(config.max_concurrency / plans.length) + (position < config.max_concurrency % plans.length ? 1 : 0)
        plan.endpoints.push({ ...config, max_concurrency: share })
        record.serves.push({ roles: plan.roles, max_concurrency: share })
      })
    })
    const empty = plans.find((plan) => plan.endpoints.length === 0)
    if (empty)
      throw new SearchInputError(
        `no endpoint serves the model "${empty.model}" of ${empty.roles.join(', ')} (every endpoint pins another ` +
          `model)`,
      )
  }

  return plans
}

/** Opens one pool; a configuration problem it finds is a SearchInputError naming the flag to fix. */
function openPool(plan: PoolPlan, options: BackendOptions): EndpointPool {
  try {
    return new EndpointPool({
      endpoints: plan.endpoints,
      ...(plan.model ? { model: plan.model } : {}),
      temperature: options.temperature,
      maxTokens: options.maxTokens,
      timeoutMs: options.timeoutMs,
      seed: options.seed,
      maxAttempts: options.maxAttempts,
      ...(options.secrets ? { secrets: options.secrets } : {}),
    })
  } catch (error) {
    if (error instanceof LlmError) {
      const hint = /no model/.test(error.message)
        ? '--model: '
        : /environment variable/.test(error.message)
          ? '--api-key-env: '
          : ''
      throw new SearchInputError(`${hint}${error.message}`)
    }
    throw error
  }
}

/**
 * The pools' accounting as one report: roles and totals summed; an endpoint shared by several pools gets its
 * counters summed, its configured (unsplit) cap, and the sum of the pools' peaks (an upper bound of its peak).
 * @example mergePoolUsage([pool], records).endpoints['http://gpu-1:8000/v1']?.peak_outstanding
 */
function mergePoolUsage(pools: readonly EndpointPool[], records: readonly EndpointRecord[]): PoolReport {
  const roles: Record<string, RoleUsage> = {}
  const endpoints: Record<string, EndpointUsage> = {}
  const total: RoleUsage = {
    calls: 0,
    ok: 0,
    failures: {},
    retries: 0,
    prompt_tokens: 0,
    completion_tokens: 0,
    wall_ms: 0,
    requests: 0,
    gave_up: 0,
  }
  for (const pool of pools) {
    const usage = pool.usage()
    for (const [role, counters] of Object.entries(usage.roles)) roles[role] = addRole(roles[role], counters)
    addRole(total, usage.total)
    for (const [name, counters] of Object.entries(usage.endpoints)) {
      const known = endpoints[name]
      if (!known) {
        endpoints[name] = {
          ...counters,
          failures: { ...counters.failures },
          max_concurrency: records.find((record) => record.name === name)?.max_concurrency ?? counters.max_concurrency,
        }
        continue
      }
      for (const key of [
        'calls',
        'ok',
        'retries',
        'prompt_tokens',
        'completion_tokens',
        'wall_ms',
        'outstanding',
        'peak_outstanding',
        'taken_out',
        'restored',
        'probes',
        'probe_failures',
      ] as const)
        known[key] += counters[key]
      for (const [kind, count] of Object.entries(counters.failures))
        known.failures[kind as keyof typeof known.failures] =
          (known.failures[kind as keyof typeof known.failures] ?? 0) + count
      known.healthy &&= counters.healthy
      if (counters.last_error) known.last_error = counters.last_error
    }
  }
  return { roles, endpoints, total }
}

function addRole(into: RoleUsage | undefined, from: RoleUsage): RoleUsage {
  const target = into ?? {
    calls: 0,
    ok: 0,
    failures: {},
    retries: 0,
    prompt_tokens: 0,
    completion_tokens: 0,
    wall_ms: 0,
    requests: 0,
    gave_up: 0,
  }
  for (const key of [
    'calls',
    'ok',
    'retries',
    'prompt_tokens',
    'completion_tokens',
    'wall_ms',
    'requests',
    'gave_up',
  ] as const)
    target[key] += from[key]
  for (const [kind, count] of Object.entries(from.failures))
    target.failures[kind as keyof typeof target.failures] =
      (target.failures[kind as keyof typeof target.failures] ?? 0) + count
  return target
}

/** A model that answers `ms` later (test-only `--mock-latency-ms`: makes a mock run slow enough to interrupt). */
function withLatency(model: ChatModel, ms: number): ChatModel {
  return {
    id: model.id,
    complete: async (request: ChatRequest): Promise<ChatResponse> => {
      await new Promise((resolve) => setTimeout(resolve, ms))
      return model.complete(request)
    },
  }
}
