/**
 * An OpenAI-compatible chat completion as rubric frameworks send it to their judge (verifiers' `JudgeRubric` through
 * the openai SDK, ART's RULER through LiteLLM), read into this project's LLM port, and the answer in OpenAI's shape.
 * The caller's sampling settings are not the judge's: the run (or the deployed artifact) decides model, temperature
 * and max_tokens; the caller's messages, response format and seed are forwarded.
 */
import { z } from 'zod'
import type { ChatContentPart, ChatMessage, ChatRequest, ChatResponse } from '../llm/types.ts'

/** Most messages one judge request may carry. */
const MAX_MESSAGES = 256

const ContentPart = z.union([
  z.object({ type: z.literal('text'), text: z.string() }),
  z.object({ type: z.literal('image_url'), image_url: z.object({ url: z.string().max(8_000_000) }) }),
])

/**
 * The body of `POST …/v1/chat/completions` (the fields a judge call uses; others are accepted and ignored).
 * @example ChatCompletionRequest.parse({ model: 'judge', messages: [{ role: 'user', content: 'Is 4 right? yes/no' }] })
 */
export const ChatCompletionRequest = z.object({
  model: z.string().max(256).optional(),
  messages: z
    .array(
      z.object({
        role: z.enum(['system', 'developer', 'user', 'assistant']),
        content: z.union([z.string(), z.array(ContentPart).max(64)]),
      }),
    )
    .min(1)
    .max(MAX_MESSAGES, `at most ${MAX_MESSAGES} messages per judge request`),
  response_format: z
    .union([
      z.object({ type: z.literal('text') }),
      z.object({ type: z.literal('json_object') }),
      z.object({
        type: z.literal('json_schema'),
        json_schema: z.object({
          name: z.string().regex(/^[\w-]{1,64}$/),
          schema: z.record(z.string(), z.unknown()),
          description: z.string().optional(),
          strict: z.boolean().nullish(),
        }),
      }),
    ])
    .optional(),
  seed: z.number().int().optional(),
  n: z.literal(1, 'n must be 1: one judgement per request').optional(),
  stream: z.literal(false, 'stream must be false: judge replies are sent whole').nullish(),
})
export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequest>

/**
 * The port's request for a judge call: the caller's messages (a developer message as system), its response format
 * and seed, and what the offline mock answers (a JSON object for a JSON request, else "yes").
 * @example const request = judgeRequest(ChatCompletionRequest.parse(body))
 */
export function judgeRequest(body: ChatCompletionRequest): ChatRequest {
  const format = body.response_format
  const messages: ChatMessage[] = body.messages.map(({ role, content }) => {
    const chatRole = role === 'developer' ? 'system' : role
    if (typeof content === 'string') return { role: chatRole, content }
    const parts = content as ChatContentPart[]
    const text = parts.flatMap((part) => (part.type === 'text' ? [part.text] : [])).join('\n\n')
    return parts.some((part) => part.type === 'image_url')
      ? { role: chatRole, content: text, parts }
      : { role: chatRole, content: text }
  })
  const json = format !== undefined && format.type !== 'text'
  return {
    role: 'scorer',
    task: 'judge_proxy',
    messages,
    json,
    ...(format?.type === 'json_schema'
      ? {
          jsonSchema: {
            name: format.json_schema.name,
            schema: format.json_schema.schema,
            ...(format.json_schema.description ? { description: format.json_schema.description } : {}),
            strict: format.json_schema.strict ?? true,
          },
        }
      : {}),
    ...(body.seed === undefined ? {} : { seed: body.seed }),
    mock: () => (json ? '{}' : 'yes'),
  }
}

/**
 * A judge reply as an OpenAI `chat.completion`.
 * @example chatCompletion(response, 'req-1') // { id: 'chatcmpl-req-1', object: 'chat.completion', choices: [...] }
 */
export function chatCompletion(response: ChatResponse, requestId: string, model: string) {
  const usage = response.usage
  return {
    id: `chatcmpl-${requestId}`,
    object: 'chat.completion' as const,
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message: { role: 'assistant' as const, content: response.text }, finish_reason: 'stop' }],
    usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
  }
}

/**
 * `GET …/v1/models`: the one model a judge endpoint serves.
 * @example modelList('openai:Qwen/Qwen3-8B').data[0].id // 'openai:Qwen/Qwen3-8B'
 */
export function modelList(model: string) {
  return { object: 'list' as const, data: [{ id: model, object: 'model' as const, owned_by: 'reward-harness' }] }
}
