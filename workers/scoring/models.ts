import { LRUCache } from 'lru-cache'
import { AppError } from '../../src/errors/index.ts'
import {
  createChatModel,
  instrumentChatModel,
  LlmError,
  pLimit,
  type ChatModel,
  type LlmCallRecord,
} from '../../src/llm/index.ts'
import { canonicalJson } from '../../src/hash/index.ts'
import { refuseLlmHost } from '../../src/llm/hosts.ts'
import {
  AGENT_ROLES,
  agentSettingsFor,
  type AgentRole,
  type AgentSettings,
  type RunConfig,
} from '../../src/schemas/run-config.ts'
import type { Env } from '../env.ts'
import { checkKeyName, judgeSecrets } from './secrets.ts'

/** Adapters are stateless, so one per distinct settings is kept per isolate (the openai client is built once). */
const adapters = new LRUCache<string, ChatModel>({ max: 64 })

export interface RoleModel {
  model: ChatModel
  settings: AgentSettings
  /** Everything about the model that changes its answers: part of every cache key. */
  signature: string
  /** The model as the archive and the call log name it: `mock:mock-heuristic-1`, `openai:Qwen/Qwen3-8B`. */
  label: string
}

/**
 * The models one request may use, wrapped with the run's concurrency caps and a call log that the
 * request persists afterwards. Built per invocation because the 6-connection limit is per invocation; `limit` is the
 * run's cap on the invocation's LLM calls, for other calls to the same kind of server (embeddings) to share.
 * @example const { forRole, calls } = requestModels(env, config); const scorer = forRole('scorer')
 */
export function requestModels(env: Env, config: RunConfig) {
  const calls: LlmCallRecord[] = []
  const totalLimit = pLimit(config.max_concurrent_llm_calls)
  const forRole = (role: AgentRole): RoleModel => {
    const settings = agentSettingsFor(config, role)
    // Checked on every use, not only when the run was created: a run stored before the allow-list (or before a host
    // was taken off it) must not send this server's keys there either.
    refuseLlmHost(env, settings.base_url, `config.agents.${role}.base_url`)
    const { signature, adapterKey } = keysOf(settings)
    let adapter = adapters.get(adapterKey)
    if (!adapter) {
      try {
        adapter = createChatModel(settings, { secrets: judgeSecrets(env), ...(env.AI ? { ai: env.AI } : {}) })
      } catch (error) {
        if (error instanceof LlmError)
          throw new AppError('llm_unavailable', `the ${role} model is not usable: ${error.message}`)
        throw error
      }
      adapters.set(adapterKey, adapter)
    }
    const model = instrumentChatModel(adapter, {
      role,
      log: calls,
      roleLimit: pLimit(settings.concurrency),
      totalLimit,
    })
    return { model, settings, signature: `${adapter.id}|${signature}`, label: adapter.id }
  }
  return { forRole, calls, limit: totalLimit }
}

/** Settings objects are memoized per run config (agentSettingsFor), so their keys are worked out once. */
const settingsKeys = new WeakMap<AgentSettings, { signature: string; adapterKey: string }>()

function keysOf(settings: AgentSettings): { signature: string; adapterKey: string } {
  let keys = settingsKeys.get(settings)
  if (!keys) {
    keys = {
      signature: canonicalJson({
        backend: settings.backend,
        model: settings.model,
        base_url: settings.base_url ?? null,
        temperature: settings.temperature,
        max_tokens: settings.max_tokens ?? null,
        seed: settings.seed ?? null,
      }),
      // Every setting the adapter is built from keys it, so runs never share a timeout or an API key.
      adapterKey: canonicalJson(settings),
    }
    settingsKeys.set(settings, keys)
  }
  return keys
}

/**
 * Refuses a run config whose `api_key_env` or header secrets name a secret it may not use (see {@link checkKeyName}).
 * @example checkRunSecrets(env, config) // throws 400 invalid_request for api_key_env "ADMIN_TOKEN"
 */
export function checkRunSecrets(env: Env, config: RunConfig): void {
  for (const role of ['default', ...AGENT_ROLES] as const) {
    const settings = role === 'default' ? config.agents.default : config.agents[role]
    if (settings?.api_key_env) checkKeyName(env, settings.api_key_env, `agents.${role}.api_key_env`, 'invalid_request')
    for (const [header, value] of Object.entries(settings?.headers ?? {})) {
      if (typeof value !== 'string')
        checkKeyName(env, value.secret, `agents.${role}.headers.${header}`, 'invalid_request')
    }
  }
}
