import { z } from 'zod'

/**
 * The most messages a trajectory may hold, task turns included: a long agentic episode (a search agent's 30 rounds of
 * call and result) fits several times over; past it the judge's prompt would not.
 */
export const MAX_TRAJECTORY_MESSAGES = 256
/** The most characters a trajectory's texts (contents, reasoning, tool arguments) may add up to. */
export const MAX_TRAJECTORY_CHARS = 400_000

/**
 * A tool's name as OpenAI's function calling allows it (letters, digits, `_`, `-`; `.` and `:` too, which MCP-style
 * names use). Only a name of this shape is ever shown to the judge outside a data block.
 */
const ToolName = z
  .string()
  .regex(/^[\w.:-]{1,64}$/, 'a tool name is 1 to 64 letters, digits, or . _ : - (as OpenAI function names are)')

/** A part of a message's content (OpenAI's `{type: "text", text}`; an image or audio part is shown as its type). */
const ContentPart = z.object({ type: z.string().max(64), text: z.string().optional() })
const Content = z.union([z.string(), z.array(ContentPart).max(200), z.null()])

/**
 * A call the policy made, as OpenAI-style chat messages carry it (`arguments` a JSON string) and as TRL and chat
 * templates keep it (`arguments` an object).
 */
const ToolCall = z.object({
  id: z.string().max(256).nullish(),
  type: z.literal('function').optional(),
  function: z.object({
    name: ToolName,
    arguments: z.union([z.string(), z.record(z.string(), z.unknown())]).nullish(),
  }),
})

/** What the trainer supplied: the task, as system (or developer) and user turns. */
const TaskMessage = z.object({ role: z.enum(['system', 'developer', 'user']), content: Content })
/** A turn of the policy: its words, the reasoning it showed (vLLM's `reasoning_content`), the tools it called. */
const PolicyMessage = z.object({
  role: z.literal('assistant'),
  content: Content.optional(),
  reasoning_content: z.string().nullish(),
  reasoning: z.string().nullish(),
  tool_calls: z.array(ToolCall).max(64).nullish(),
})
/** What a tool returned to the policy; `tool_call_id` (OpenAI, verl) or `name` (TRL) ties it to its call. */
const ToolMessage = z.object({
  role: z.literal('tool'),
  content: Content,
  tool_call_id: z.string().max(256).nullish(),
  name: ToolName.nullish(),
})

/**
 * One chat message of a trajectory, OpenAI-style, as TRL's conversational completions and verl's agent loop produce
 * them. Unknown fields are dropped.
 * @example TrajectoryMessage.parse({ role: 'tool', name: 'search', content: 'Paris is the capital of France.' })
 */
export const TrajectoryMessage = z.discriminatedUnion('role', [TaskMessage, PolicyMessage, ToolMessage])
export type TrajectoryMessage = z.infer<typeof TrajectoryMessage>

/** A message's content as text: text parts joined, any other part shown as its type (`[image]`). */
export function contentText(content: z.infer<typeof Content> | undefined): string {
  if (content === null || content === undefined) return ''
  if (typeof content === 'string') return content
  return content
    .map((part) => (typeof part.text === 'string' ? part.text : `[${part.type.replace(/_url$/, '')}]`))
    .join('\n')
}

/**
 * A tool call's arguments as the judge reads them: the JSON string as sent, an object as JSON.
 * @example toolArguments({ function: { name: 'search', arguments: { q: 'x' } } }) // '{"q":"x"}'
 */
export function toolArguments(call: z.infer<typeof ToolCall>): string {
  const args = call.function.arguments
  if (args === null || args === undefined) return ''
  return typeof args === 'string' ? args : JSON.stringify(args)
}

/** Every text of a trajectory, counted against {@link MAX_TRAJECTORY_CHARS}. */
function trajectoryChars(messages: readonly TrajectoryMessage[]): number {
  let chars = 0
  for (const message of messages) {
    chars += contentText(message.content).length
    if (message.role === 'assistant') {
      chars += (message.reasoning_content ?? message.reasoning ?? '').length
      for (const call of message.tool_calls ?? []) chars += toolArguments(call).length + call.function.name.length
    }
  }
  return chars
}

/**
 * The issue a limit of the trajectory adds: a custom zod issue whose `params.limit` names the limit, which the HTTP
 * layer answers with 413 `payload_too_large` (`tooLargeOf`) rather than a 400.
 */
function limitIssue(limit: string, max: number, actual: number, message: string) {
  return { code: 'custom' as const, message, params: { limit, max, actual } }
}

/**
 * A conversation the policy took part in, whole: the task's system and user turns, then the policy's turns, the tools
 * it called and what they returned (and any later user turns). At most {@link MAX_TRAJECTORY_MESSAGES} messages and
 * {@link MAX_TRAJECTORY_CHARS} characters (a 413 naming the limit), with at least one policy turn.
 * @example Trajectory.parse([{ role: 'user', content: 'Capital?' }, { role: 'assistant', content: 'Paris.' }])
 */
export const Trajectory = z.array(TrajectoryMessage).superRefine((messages, ctx) => {
  if (messages.length > MAX_TRAJECTORY_MESSAGES) {
    ctx.addIssue(
      limitIssue(
        'max_trajectory_messages',
        MAX_TRAJECTORY_MESSAGES,
        messages.length,
        `a trajectory holds at most ${MAX_TRAJECTORY_MESSAGES} messages (max_trajectory_messages); this one has ` +
          `${messages.length}: drop early turns or score the episode in parts`,
      ),
    )
    return
  }
  const chars = trajectoryChars(messages)
  if (chars > MAX_TRAJECTORY_CHARS) {
    ctx.addIssue(
      limitIssue(
        'max_trajectory_chars',
        MAX_TRAJECTORY_CHARS,
        chars,
        `a trajectory's texts add up to at most ${MAX_TRAJECTORY_CHARS} characters (max_trajectory_chars); this one ` +
          `has ${chars}: truncate long tool results (verl: multi_turn.max_tool_response_length)`,
      ),
    )
  }
  if (!messages.some((message) => message.role === 'assistant'))
    ctx.addIssue({ code: 'custom', message: 'a trajectory needs at least one assistant (policy) message' })
})
export type Trajectory = z.infer<typeof Trajectory>

/**
 * The limit a zod issue names when it is one of a trajectory's limits (a 413), else undefined (a 400).
 * @example const limit = limitOf(issue); if (limit) throw new AppError('payload_too_large', issue.message)
 */
export function limitOf(issue: z.core.$ZodIssue): { limit: string; max: number; actual: number } | undefined {
  if (issue.code !== 'custom') return undefined
  const params = (issue as { params?: { limit?: unknown; max?: unknown; actual?: unknown } }).params
  if (typeof params?.limit !== 'string') return undefined
  return { limit: params.limit, max: Number(params.max), actual: Number(params.actual) }
}

/**
 * Where the task ends: the index of the first policy turn (the turns before it are what a GRPO group shares).
 * @example taskLength([{ role: 'user', content: 'Q' }, { role: 'assistant', content: 'A' }]) // 1
 */
export function taskLength(messages: readonly TrajectoryMessage[]): number {
  const first = messages.findIndex((message) => message.role === 'assistant')
  return first < 0 ? messages.length : first
}

/**
 * The task of a trajectory as text, `role: content` per turn, one per paragraph: what `rollout.input` holds, so a
 * conversational prompt hashes to the same instance whether it arrives as messages or through a compat route.
 * @example taskText([{ role: 'user', content: 'Capital of France?' }]) // 'user: Capital of France?'
 */
export function taskText(messages: readonly TrajectoryMessage[]): string {
  return messages
    .slice(0, taskLength(messages))
    .map((message) => `${message.role}: ${contentText(message.content)}`)
    .join('\n\n')
}

/**
 * What follows the task, as plain text for readers of `rollout.output` (the analyzer, the archive's text column, a
 * distilled classifier): the policy's words as they are, its calls and the results it received marked as such. The
 * judge never reads this; it reads each turn in a block of its own (`renderTrajectoryTurns`).
 * @example trajectoryText(messages) // 'Let me look.\n\n[tool call search] {"q":"capital"}\n\n[tool result search] …'
 */
export function trajectoryText(messages: readonly TrajectoryMessage[]): string {
  const parts: string[] = []
  for (const message of messages.slice(taskLength(messages))) {
    if (message.role === 'assistant') {
      const words = contentText(message.content)
      if (words !== '') parts.push(words)
      for (const call of message.tool_calls ?? [])
        parts.push(`[tool call ${call.function.name}] ${toolArguments(call)}`)
    } else if (message.role === 'tool') {
      parts.push(`[tool result${message.name ? ` ${message.name}` : ''}] ${contentText(message.content)}`)
    } else parts.push(`[${message.role}] ${contentText(message.content)}`)
  }
  return parts.join('\n\n')
}
