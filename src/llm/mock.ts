import {
  LlmError,
  type ChatModel,
  type ChatRequest,
  type ChatResponse,
  type MockReply,
  type MockSampling,
} from './types.ts'

/** What the mock charges per image part (OpenAI's low-detail image cost). */
const IMAGE_TOKENS = 85

/**
 * The offline default backend: deterministic heuristics, not a judge. It answers with the request's own `mock`
 * reply, which the asking agent builds from its structured inputs in the same JSON a real model is asked for (see
 * the `mock.ts` beside each agent, search role and the judge library), so every parsing path runs exactly as in
 * production and this backend knows no agent.
 * @example const model = new MockChatModel(); await model.complete(request)
 */
export class MockChatModel implements ChatModel {
  readonly id: string
  readonly #scoreNoise: number

  /**
   * `scoreNoise` makes sampled replies (the scorer's grades) vary like a model at a temperature above 0: a request
   * that carries a `seed` has each grade moved one point up or down with that probability, drawn from the seed (the
   * same seed, the same grades). Requests without a seed, and replies with nothing to sample, stay deterministic.
   */
  constructor(
    readonly model = 'mock-heuristic-1',
    options: { scoreNoise?: number } = {},
  ) {
    this.#scoreNoise = options.scoreNoise ?? 0
    this.id = this.#scoreNoise > 0 ? `mock:${model}+score-noise=${this.#scoreNoise}` : `mock:${model}`
  }

  async complete(request: ChatRequest): Promise<ChatResponse> {
    if (!request.mock)
      throw new LlmError('bad_request', `the mock backend has no reply for a '${request.task}' request`)
    const reply = request.mock({
      noise: this.#scoreNoise,
      ...(request.seed === undefined ? {} : { seed: request.seed }),
    })
    const { text, firstTokenLogprobs } =
      typeof reply === 'string' ? { text: reply, firstTokenLogprobs: undefined } : reply
    // Vision messages: the mock reads the text (`content`) and counts each image part as a fixed token cost.
    const promptChars = request.messages.reduce((sum, message) => sum + message.content.length, 0)
    const images = request.messages.reduce(
      (sum, message) => sum + (message.parts?.filter((part) => part.type === 'image_url').length ?? 0),
      0,
    )
    return {
      text,
      model: this.model,
      usage: {
        prompt_tokens: Math.ceil(promptChars / 4) + IMAGE_TOKENS * images,
        completion_tokens: Math.ceil(text.length / 4),
      },
      ...(firstTokenLogprobs && request.firstTokenAlternatives ? { firstTokenLogprobs } : {}),
    }
  }
}

/**
 * A request's mock reply: `answer(input)` as JSON, with `input` fixed when the request is built.
 * @example const request = { ...judgeRequest, mock: jsonMockReply(answerSearchJudge, { prompt, first, second }) }
 */
export function jsonMockReply<T>(answer: (input: T, sampling: MockSampling) => unknown, input: T): MockReply {
  return (sampling) => JSON.stringify(answer(input, sampling))
}
