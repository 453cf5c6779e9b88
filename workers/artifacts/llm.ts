import { LRUCache } from 'lru-cache'
import { redactUrl } from '../../src/credentials/index.ts'
import { AppError } from '../../src/errors/index.ts'
/**
 * Which model grades for a deployed artifact: the deployment's `llm` when it names one (whatever model the artifact
 * was searched on, the mock included), else the artifact's own — an OpenAI-compatible endpoint (runtime backend
 * `openai`, with the Worker's `RM_LLM_BASE_URL` / `RM_LLM_API_KEY` as the fallback) or the mock, which every answer
 * then names as such. Always with the artifact's temperature, max tokens and seed.
 */
import { z } from 'zod'
import { refuseLlmHost } from '../../src/llm/hosts.ts'
import { MockChatModel, OpenAIChatModel, resolveHeaders, type ChatModel } from '../../src/llm/index.ts'
import { AgentHeaders } from '../../src/schemas/run-config.ts'
import { strict } from '../../src/schemas/strict.ts'
import { STRUCTURED_OUTPUTS, type StructuredOutput } from '../../src/schemas/structured-output.ts'
import { canonicalJson } from '../../src/hash/index.ts'
import type { AnyRmArtifact } from '../../src/schemas/artifact.ts'
import { checkKeyName, judgeSecrets } from '../scoring/secrets.ts'
import type { Env } from '../env.ts'

/** How long one verifier call may take before it is retried (the verl client waits 30 s per request by default). */
const RM_LLM_TIMEOUT_MS = 60_000

/**
 * The endpoint a deployment names for an openai-backend artifact. `api_key_env` names a Worker secret holding the
 * key (never the key itself); without it `RM_LLM_API_KEY` is used.
 * @example DeploymentLlm.parse({ base_url: 'http://gpu-1:8000/v1', model: 'Qwen/Qwen3-8B', api_key_env: 'VLLM_KEY' })
 */
export const DeploymentLlm = z
  .object({
    base_url: z.url({ protocol: /^https?$/, message: 'base_url must be an http(s) URL such as http://gpu-1:8000/v1' }),
    model: z.string().min(1).max(200).optional(),
    api_key_env: z
      .string()
      .regex(/^[A-Z_][A-Z0-9_]*$/, 'an environment variable name such as VLLM_API_KEY')
      .optional(),
    /** Extra headers on every call (e.g. Cloudflare Access service-token headers), a literal or `{secret: NAME}`. */
    headers: AgentHeaders.optional(),
    /** `json_schema` when the server enforces a JSON schema on replies: every reply then parses, no repair call. */
    structured_output: z.enum(STRUCTURED_OUTPUTS).optional(),
  })
  .apply(strict)
export type DeploymentLlm = z.infer<typeof DeploymentLlm>

/** The OpenAI-compatible settings an artifact is served with, once resolved. */
export interface ResolvedEndpoint {
  baseURL: string
  model: string
  apiKey: string
  headers?: Record<string, string>
  structuredOutput?: StructuredOutput
}

/**
 * Where an openai-backend artifact would be graded, or why it cannot be (`AppError('llm_not_configured')`).
 * Mock-backend artifacts need no endpoint and resolve to undefined.
 * @example resolveEndpoint(env, artifact, { base_url: 'http://gpu-1:8000/v1' }).model // the artifact's verifier model
 */
export function resolveEndpoint(
  env: Env,
  artifact: Pick<AnyRmArtifact, 'runtime'>,
  llm: DeploymentLlm | null | undefined,
): ResolvedEndpoint | undefined {
  if (artifact.runtime.backend === 'mock' && !llm) return undefined
  if (artifact.runtime.backend === 'mock' && !llm?.model)
    throw new AppError(
      'llm_not_configured',
      'the artifact was searched on the mock backend, so it names no model a real judge serves: ' +
        'deploy it with "llm": {"base_url": "http://…/v1", "model": "<the judge model>"}',
    )
  const vars = env
  const baseURL = llm?.base_url ?? vars.RM_LLM_BASE_URL
  if (!baseURL) {
    throw new AppError(
      'llm_not_configured',
      'the artifact grades with an OpenAI-compatible model (runtime.backend "openai") but no endpoint is configured: ' +
        'deploy it with "llm": {"base_url": "http://…/v1"} or set the RM_LLM_BASE_URL var on the Worker',
    )
  }
  if (!/^https?:\/\//.test(baseURL))
    throw new AppError('llm_not_configured', `RM_LLM_BASE_URL must be an http(s) URL (got "${redactUrl(baseURL)}")`)
  refuseLlmHost(env, baseURL, llm?.base_url ? 'llm.base_url' : 'RM_LLM_BASE_URL')
  let apiKey = vars.RM_LLM_API_KEY
  if (llm?.api_key_env) {
    checkKeyName(env, llm.api_key_env, "the deployment's llm.api_key_env", 'llm_not_configured')
    apiKey = judgeSecrets(env)[llm.api_key_env]
  }
  for (const [name, value] of Object.entries(llm?.headers ?? {})) {
    if (typeof value !== 'string')
      checkKeyName(env, value.secret, `the deployment's llm.headers.${name}`, 'llm_not_configured')
  }
  const headers = llm?.headers ? resolveHeaders(llm.headers, judgeSecrets(env)) : undefined
  return {
    baseURL,
    model: llm?.model ?? runtimeModel(artifact.runtime),
    apiKey: apiKey || 'not-needed',
    ...(headers ? { headers } : {}),
    ...(llm?.structured_output ? { structuredOutput: llm.structured_output } : {}),
  }
}

/** What a deployment grades with, as its answers say: the mock is always named as one. */
export type ServingJudge =
  | { backend: 'mock'; model: string; note: string }
  | { backend: 'openai'; model: string; base_url: string }

/**
 * The judge a deployment serves with, for `healthz` and every score; never a silent mock.
 * @example servingJudge(env, artifact, null) // { backend: 'mock', model: 'mock-heuristic-1', note: '…' }
 */
export function servingJudge(
  env: Env,
  artifact: Pick<AnyRmArtifact, 'runtime'>,
  llm: DeploymentLlm | null | undefined,
): ServingJudge {
  const endpoint = resolveEndpoint(env, artifact, llm)
  if (endpoint) return { backend: 'openai', model: endpoint.model, base_url: redactUrl(endpoint.baseURL) }
  return {
    backend: 'mock',
    model: runtimeModel(artifact.runtime),
    note:
      'the mock backend: a deterministic heuristic, not a judge; deploy with --llm-base-url and --llm-model to ' +
      'score with one',
  }
}

/** Adapters are stateless; one per distinct settings is kept per isolate (the openai client is built once). */
const adapters = new LRUCache<string, ChatModel>({ max: 64 })

/**
 * The chat model that grades for an artifact: `MockChatModel` on the mock backend, else `OpenAIChatModel` on the
 * resolved endpoint with the artifact's temperature, max tokens and seed.
 * @example const model = verifierModel(env, artifact, deployment.llm)
 */
export function verifierModel(
  env: Env,
  artifact: Pick<AnyRmArtifact, 'runtime'>,
  llm: DeploymentLlm | null | undefined,
): ChatModel {
  const { runtime } = artifact
  const modelName = runtimeModel(runtime)
  const endpoint = resolveEndpoint(env, artifact, llm)
  const settings = endpoint
    ? {
        backend: 'openai',
        ...endpoint,
        temperature: runtime.temperature,
        maxTokens: runtime.max_tokens,
        seed: runtime.seed,
        timeoutMs: RM_LLM_TIMEOUT_MS,
      }
    : { backend: 'mock', model: modelName }
  const key = canonicalJson(settings)
  let model = adapters.get(key)
  if (!model) {
    model = endpoint
      ? new OpenAIChatModel({
          baseURL: endpoint.baseURL,
          apiKey: endpoint.apiKey,
          ...(endpoint.headers ? { headers: endpoint.headers } : {}),
          ...(endpoint.structuredOutput ? { structuredOutput: endpoint.structuredOutput } : {}),
          model: endpoint.model,
          temperature: runtime.temperature,
          maxTokens: runtime.max_tokens,
          seed: runtime.seed,
          timeoutMs: RM_LLM_TIMEOUT_MS,
        })
      : new MockChatModel(modelName)
    adapters.set(key, model)
  }
  return model
}

/**
 * The model an artifact's runtime names: `verifier_model` (rubric kind) or `model` (library kind).
 * @example runtimeModel(artifact.runtime) // 'mock-verifier'
 */
function runtimeModel(runtime: AnyRmArtifact['runtime']): string {
  return 'verifier_model' in runtime ? runtime.verifier_model : runtime.model
}
