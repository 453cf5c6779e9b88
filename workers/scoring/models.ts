import { createChatModel, instrumentChatModel, pLimit, type ChatModel, type LlmCallRecord } from '../../src/llm/index.ts'
import { canonicalJson } from '../../src/hash/index.ts'
import { agentSettingsFor, type AgentRole, type AgentSettings, type RunConfig } from '../../src/schemas/run-config.ts'
import type { Env } from '../env.ts'

/** Adapters are stateless, so one per distinct settings is kept per isolate (the openai client is built once). */
const adapters = new Map<string, ChatModel>()

export interface RoleModel {
  model: ChatModel
  settings: AgentSettings
  /** Everything about the model that changes its answers: part of every cache key. */
  signature: string
}

/**
 * The models one request may use, wrapped with the run's concurrency caps and a call log that the
 * request persists afterwards. Built per invocation because the 6-connection limit is per invocation.
 * @example const { forRole, calls } = requestModels(env, config); const scorer = forRole('scorer')
 */
export function requestModels(env: Env, config: RunConfig) {
  const calls: LlmCallRecord[] = []
  const totalLimit = pLimit(config.max_concurrent_llm_calls)
  const forRole = (role: AgentRole): RoleModel => {
    const settings = agentSettingsFor(config, role)
    const signature = canonicalJson({ backend: settings.backend, model: settings.model, base_url: settings.base_url ?? null, temperature: settings.temperature, max_tokens: settings.max_tokens, seed: settings.seed ?? null })
    let adapter = adapters.get(signature)
    if (!adapter) {
      adapter = createChatModel(settings, { secrets: env as unknown as Record<string, unknown>, ...(env.AI ? { ai: env.AI } : {}) })
      adapters.set(signature, adapter)
    }
    const model = instrumentChatModel(adapter, { role, log: calls, roleLimit: pLimit(settings.concurrency), totalLimit })
    return { model, settings, signature: `${adapter.id}|${signature}` }
  }
  return { forRole, calls }
}
