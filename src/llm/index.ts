export type { ChatModel } from './types.ts'

export { LlmError } from './types.ts'

export { withRetry } from './retry.ts'

export { MockChatModel } from './mock.ts'

export { OpenAIChatModel } from './openai.ts'

export { backendOf, createChatModel, instrumentChatModel, pLimit, resolveHeaders } from './compose.ts'

export type { LlmCallRecord } from './compose.ts'

export { llmStats } from './stats.ts'
