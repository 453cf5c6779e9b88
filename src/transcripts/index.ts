/**
 * Multi-turn responses as trainers decode them with special tokens kept (OpenRLHF's `query`, slime's `response`):
 * ChatML turns (`<|im_start|>role … <|im_end|>`), Hermes tool calls (`<tool_call>{json}</tool_call>`) in the policy's
 * turns and tool results (`<tool_response>…</tool_response>`) in the turns the trainer added. Turned into chat
 * messages, so the judge reads who said what. A policy cannot write a turn boundary of its own: `<|im_end|>` ends its
 * generation.
 */

/** A message as `rollout.messages` takes it. */
type TurnMessage =
  | { role: 'assistant'; content: string; tool_calls?: ToolCallMessage[] }
  | { role: 'tool'; content: string; tool_call_id?: string }
  | { role: 'user' | 'system'; content: string }

interface ToolCallMessage {
  id: string
  type: 'function'
  function: { name: string; arguments: string }
}

const TURN = /<\|im_start\|>(\w+)\n/g
const TOOL_CALL = /<tool_call>\s*([\s\S]*?)\s*<\/tool_call>/g
const TOOL_RESPONSE = /<tool_response>\s*([\s\S]*?)\s*<\/tool_response>/g
const END = /<\|im_end\|>|<\|endoftext\|>/g
const TOOL_NAME = /^[\w.:-]{1,64}$/

/**
 * The turns of a decoded multi-turn response (what follows the prompt, which ends where the policy's first turn
 * starts), as chat messages; undefined when the text holds no ChatML turn boundary (a single turn: judged as text).
 * @example chatMlTurns('Checking.<tool_call>{"name":"f","arguments":{}}</tool_call><|im_end|>\n<|im_start|>user\n…')
 */
export function chatMlTurns(response: string): TurnMessage[] | undefined {
  const starts = [...response.matchAll(TURN)]
  if (starts.length === 0) return undefined
  const segments = [{ role: 'assistant', text: response.slice(0, starts[0]!.index) }]
  starts.forEach((start, index) => {
    const end = index + 1 < starts.length ? starts[index + 1]!.index : response.length
    segments.push({ role: start[1]!, text: response.slice(start.index + start[0].length, end) })
  })
  const messages: TurnMessage[] = []
  let callCount = 0
  const unanswered: string[] = []
  for (const { role, text } of segments) {
    const body = text.replace(END, '').trim()
    if (role === 'assistant') {
      if (body === '' && messages.length > 0) continue
      const calls = [...body.matchAll(TOOL_CALL)].map((match) => toolCall(match[1]!, `call_${++callCount}`))
      unanswered.push(...calls.map((call) => call.id))
      const words = body.replace(TOOL_CALL, '').trim()
      messages.push({ role: 'assistant', content: words, ...(calls.length ? { tool_calls: calls } : {}) })
      continue
    }
    const results = [...body.matchAll(TOOL_RESPONSE)].map((match) => match[1]!)
    if (role === 'tool' || results.length > 0) {
      for (const result of results.length ? results : [body]) {
        const id = unanswered.shift()
        messages.push({ role: 'tool', content: result, ...(id ? { tool_call_id: id } : {}) })
      }
    } else messages.push({ role: role === 'system' ? 'system' : 'user', content: body })
  }
  return messages
}

/** A `<tool_call>` body as an OpenAI tool call; one that is not Hermes JSON keeps its text as the arguments. */
function toolCall(raw: string, id: string): ToolCallMessage {
  try {
    const parsed = JSON.parse(raw) as { name?: unknown; arguments?: unknown }
    if (typeof parsed.name === 'string' && TOOL_NAME.test(parsed.name)) {
      const args = typeof parsed.arguments === 'string' ? parsed.arguments : JSON.stringify(parsed.arguments ?? {})
      return { id, type: 'function', function: { name: parsed.name, arguments: args } }
    }
  } catch {
    // Not JSON: kept as written, under a name that says so.
  }
  return { id, type: 'function', function: { name: 'unparsed_tool_call', arguments: raw } }
}
