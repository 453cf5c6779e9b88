export type {
  ChatContentPart,
  ChatMessage,
  ChatModel,
  ChatRequest,
  ChatResponse,
  ChatUsage,
  LlmFailure,
  MockReply,
  MockSampling,
} from './types.ts'
export { LlmError, visionMessage } from './types.ts'
export { withRetry, parseRetryAfter } from './retry.ts'
export type { RetryPolicy } from './retry.ts'
export { jsonMockReply, MockChatModel } from './mock.ts'
export { OpenAIChatModel } from './openai.ts'
export { WorkersAiChatModel } from './workers-ai.ts'
export { backendOf, createChatModel, instrumentChatModel, pLimit, resolveHeaders } from './compose.ts'
export type { ChatModelDeps, LlmCallRecord } from './compose.ts'
export { addLlmStats, llmStats } from './stats.ts'
export type { LlmStat } from './stats.ts'
