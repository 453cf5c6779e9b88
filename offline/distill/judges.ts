/**
 * The judges `distill` re-judges with: the mock (with sampling noise, so repeats differ as a sampled model's do) or
 * an OpenAI-compatible endpoint, each behind the persistent reply cache, so a question asked again costs no call.
 */
import { MockChatModel } from '../../src/llm/mock.ts'
import type { ChatModel } from '../../src/llm/types.ts'
import { UsageError } from '../../src/usage-error/index.ts'
import {
  CachedChatModel,
  EndpointConfigError,
  EndpointPool,
  parseEndpointFlag,
  type EndpointConfig,
} from '../llm/index.ts'

/** The mock judge's model name (its id keys the cache). */
const MOCK_JUDGE = 'mock-heuristic-1'

/** A parsed `--judge`. */
export type JudgeSpec = { kind: 'mock' } | { kind: 'endpoint'; config: EndpointConfig }

/** How a judge samples. */
export interface JudgeSampling {
  /** The mock's share of grades moved one point per repeat. */
  mockNoise: number
  temperature: number
  maxTokens: number
  timeoutMs: number
  maxAttempts: number
}

/** An open judge: the cached model, and what it cost. */
export interface Judge {
  /** The model's id (`mock:…` or `openai:<model>`). */
  id: string
  model: CachedChatModel
  close(): Promise<void>
}

/**
 * Parses `--judge`: `mock`, or an endpoint `URL[,model=M,api_key_env=VAR,max_concurrency=N]` as `--endpoint` takes.
 * @example parseJudgeSpec('http://gpu-1:8000/v1,model=Qwen/Qwen3-8B') // { kind: 'endpoint', config: { base_url: …,
 *   model: 'Qwen/Qwen3-8B', … } }
 */
export function parseJudgeSpec(value: string): JudgeSpec {
  if (value === 'mock') return { kind: 'mock' }
  if (!/^https?:\/\//.test(value))
    throw new UsageError(
      `--judge: expected "mock" or an http(s) endpoint URL[,model=M,api_key_env=VAR], got "${value}"`,
    )
  try {
    const config = parseEndpointFlag(value)
    if (!config.model) throw new UsageError(`--judge ${value}: name the model (…,model=<name>)`)
    return { kind: 'endpoint', config }
  } catch (error) {
    if (error instanceof EndpointConfigError) throw new UsageError(error.message.replace(/^--endpoint/, '--judge'))
    throw error
  }
}

/**
 * Opens a judge behind the reply cache `<cacheDir>/<model id>/llm-cache.sqlite`.
 * @example const judge = await openJudge({ kind: 'mock' }, '.reward-harness/cache', sampling); … await judge.close()
 */
export async function openJudge(spec: JudgeSpec, cacheDir: string, sampling: JudgeSampling): Promise<Judge> {
  let model: ChatModel
  let close = async () => {}
  if (spec.kind === 'mock') {
    model = new MockChatModel(MOCK_JUDGE, { scoreNoise: sampling.mockNoise })
  } else {
    const pool = new EndpointPool({
      endpoints: [spec.config],
      temperature: sampling.temperature,
      maxTokens: sampling.maxTokens,
      timeoutMs: sampling.timeoutMs,
      maxAttempts: sampling.maxAttempts,
      probeAtStart: false,
    })
    model = pool
    close = () => pool.close()
  }
  const cached = await CachedChatModel.open({
    dir: `${cacheDir}/${model.id.replace(/[^A-Za-z0-9._=+-]+/g, '_')}`,
    model,
  })
  return {
    id: model.id,
    model: cached,
    close: async () => {
      await cached.close()
      await close()
    },
  }
}
