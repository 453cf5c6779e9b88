import { DEFAULT_MAX_TOKENS } from './response-format.ts'
import { LlmError, type ChatModel, type ChatRequest, type ChatResponse } from './types.ts'

/** The part of the Workers AI binding this adapter uses. */
export interface WorkersAiBinding {
  run(model: string, input: Record<string, unknown>, options?: Record<string, unknown>): Promise<unknown>
}

/**
 * Workers AI through the `AI` binding (production only: the binding has no local simulator).
 * @example const model = new WorkersAiChatModel(env.AI, '@cf/meta/llama-3.1-8b-instruct', { temperature: 0, maxTokens:
 *   1024 })
 */
export class WorkersAiChatModel implements ChatModel {
  readonly id: string
  constructor(
    private readonly ai: WorkersAiBinding,
    private readonly model: string,
    private readonly options: { temperature: number; maxTokens?: number | undefined; seed?: number },
  ) {
    this.id = `workers-ai:${model}`
  }

  async complete(request: ChatRequest): Promise<ChatResponse> {
    let result: unknown
    try {
      result = await this.ai.run(this.model, {
        // Workers AI text models take plain `{role, content}`; image parts are not forwarded.
        messages: request.messages.map(({ role, content }) => ({ role, content })),
        temperature: this.options.temperature,
        max_tokens: this.options.maxTokens ?? request.maxTokens ?? DEFAULT_MAX_TOKENS,
        ...(this.options.seed === undefined ? {} : { seed: this.options.seed }),
      })
    } catch (error) {
      throw new LlmError('server_error', `Workers AI failed: ${(error as Error).message}`)
    }
    const reply = result as { response?: unknown; usage?: { prompt_tokens?: number; completion_tokens?: number } }
    const text =
      typeof reply.response === 'string'
        ? reply.response
        : reply.response === undefined
          ? undefined
          : JSON.stringify(reply.response)
    if (!text) throw new LlmError('invalid_reply', 'Workers AI returned no response text')
    return {
      text,
      model: this.model,
      usage: { prompt_tokens: reply.usage?.prompt_tokens ?? 0, completion_tokens: reply.usage?.completion_tokens ?? 0 },
    }
  }
}
