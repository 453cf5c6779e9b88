import pLimit, { type LimitFunction } from 'p-limit'
import type { AgentRole, AgentSettings } from '../schemas/run-config.ts'
import { MockChatModel } from './mock.ts'
import { OpenAIChatModel } from './openai.ts'
import { LlmError, type ChatModel, type ChatRequest, type ChatResponse } from './types.ts'
import { WorkersAiChatModel, type WorkersAiBinding } from './workers-ai.ts'

export interface ChatModelDeps {
  /** Where `api_key_env` names are looked up: the Worker's env, or process.env offline. */
  secrets: Record<string, unknown>
  ai?: WorkersAiBinding
}

/**
 * The backend a role's settings resolve to: `auto` is openai when a base URL is set, else the mock.
 * @example backendOf(AgentSettings.parse({ backend: 'auto' })) // 'mock'
 */
export function backendOf(
  settings: Pick<AgentSettings, 'backend' | 'base_url'>,
): Exclude<AgentSettings['backend'], 'auto'> {
  return settings.backend === 'auto' ? (settings.base_url ? 'openai' : 'mock') : settings.backend
}

/**
 * Builds the model one role's settings call for: `auto` is openai when a base URL is set, else the mock.
 * @example const model = createChatModel(agentSettingsFor(config, 'scorer'), { secrets: env })
 */
export function createChatModel(settings: AgentSettings, deps: ChatModelDeps): ChatModel {
  switch (backendOf(settings)) {
    case 'mock':
      return new MockChatModel(settings.model)
    case 'openai': {
      if (!settings.base_url) throw new LlmError('bad_request', 'the openai backend needs a base_url')
      const apiKey = settings.api_key_env ? deps.secrets[settings.api_key_env] : undefined
      if (settings.api_key_env && typeof apiKey !== 'string') {
        throw new LlmError('bad_request', `the secret ${settings.api_key_env} named by api_key_env is not set`)
      }
      return new OpenAIChatModel({
        baseURL: settings.base_url,
        apiKey: (apiKey as string | undefined) ?? 'not-needed',
        ...(settings.headers ? { headers: resolveHeaders(settings.headers, deps.secrets) } : {}),
        model: settings.model,
        temperature: settings.temperature,
        ...(settings.max_tokens === undefined ? {} : { maxTokens: settings.max_tokens }),
        structuredOutput: settings.structured_output,
        timeoutMs: settings.timeout_ms,
        ...(settings.seed === undefined ? {} : { seed: settings.seed }),
      })
    }
    case 'workers-ai':
      if (!deps.ai) throw new LlmError('bad_request', 'the workers-ai backend needs the AI binding (production only)')
      return new WorkersAiChatModel(deps.ai, settings.model, {
        temperature: settings.temperature,
        maxTokens: settings.max_tokens,
        ...(settings.seed === undefined ? {} : { seed: settings.seed }),
      })
  }
}

/** One LLM call as the call log keeps it. Never holds prompt text or keys. */
export interface LlmCallRecord {
  role: AgentRole
  model: string
  outcome: 'ok' | LlmError['kind']
  latency_ms: number
  prompt_tokens: number
  completion_tokens: number
  attempt: number
  at: string
}

/**
 * Wraps a model so each call is counted into `log` (a reply its reader refuses as the failure it names) and held to
 * a per-role and a shared concurrency cap.
 * @example const scorer = instrumentChatModel(model, { role: 'scorer', log, roleLimit: pLimit(4), totalLimit })
 */
export function instrumentChatModel(
  model: ChatModel,
  options: { role: AgentRole; log: LlmCallRecord[]; roleLimit: LimitFunction; totalLimit: LimitFunction },
): ChatModel {
  let attempt = 0
  return {
    id: model.id,
    complete: (request: ChatRequest) =>
      options.roleLimit(() =>
        options.totalLimit(async (): Promise<ChatResponse> => {
          const started = Date.now()
          const record = (outcome: LlmCallRecord['outcome'], usage = { prompt_tokens: 0, completion_tokens: 0 }) => {
            const entry: LlmCallRecord = {
              role: options.role,
              model: model.id,
              outcome,
              latency_ms: Date.now() - started,
              ...usage,
              attempt: ++attempt,
              at: new Date(started).toISOString(),
            }
            options.log.push(entry)
            return entry
          }
          try {
            const response = await model.complete(request)
            const entry = record('ok', response.usage)
            return { ...response, refuse: (kind) => (entry.outcome = kind) }
          } catch (error) {
            if (error instanceof LlmError) record(error.kind, error.details.usage)
            else record('network')
            throw error
          }
        }),
      ),
  }
}

export { pLimit }

/**
 * Extra headers with each `{secret}` replaced by the secret's value (a missing one is a refused request).
 * @example resolveHeaders({ 'CF-Access-Client-Id': { secret: 'ACCESS_ID' } }, env) // { 'CF-Access-Client-Id': '…' }
 */
export function resolveHeaders(
  headers: NonNullable<AgentSettings['headers']>,
  secrets: Record<string, unknown>,
): Record<string, string> {
  return Object.fromEntries(
    Object.entries(headers).map(([name, value]) => {
      if (typeof value === 'string') return [name, value]
      const secret = secrets[value.secret]
      if (typeof secret !== 'string')
        throw new LlmError('bad_request', `the secret ${value.secret} named by header ${name} is not set`)
      return [name, secret]
    }),
  )
}
