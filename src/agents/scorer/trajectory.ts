/**
 * A trajectory as the judge reads it: each turn after the task in a data block of its own, introduced by a line the
 * harness writes (who said it, which tool answered which call). A block's tag is a hash of its own text, so no turn
 * can close its block early and pose as another speaker; only a real call appears as one, and a tool's output is
 * never shown as the policy's words.
 */
import type { Locale } from '../../prompts/index.ts'
import { contentText, taskLength, toolArguments, type TrajectoryMessage } from '../../schemas/trajectory.ts'
import { dataBoundary } from '../run-agent.ts'

/** How each kind of turn is introduced, per locale; `n` is the turn's number after the task. */
const LINES = {
  en: {
    words: (n: number) => `Turn ${n}, the policy's own words`,
    reasoning: (n: number) => `Turn ${n}, the policy's reasoning`,
    call: (n: number, k: number, tool: string) => `Turn ${n}, the policy's call ${k}: tool "${tool}", these arguments`,
    result: (n: number, k: number, tool: string) =>
      `Turn ${n}, a tool result the policy received (not its words): what tool "${tool}" returned to call ${k}`,
    orphan: (n: number, tool: string | undefined) =>
      `Turn ${n}, a tool result the policy received (not its words)${tool ? ` from tool "${tool}"` : ''}, ` +
      'answering no call shown here',
    user: (n: number) => `Turn ${n}, a user message`,
    system: (n: number) => `Turn ${n}, a system message`,
    tagged: (tag: string) => `(data, tagged ${tag}):`,
    summary: (calls: string[], results: number, orphans: number) =>
      (calls.length === 0
        ? 'the policy made no tool call'
        : `the policy made ${calls.length} tool call${calls.length === 1 ? '' : 's'} (${tally(calls)})`) +
      `; ${results} tool result${results === 1 ? '' : 's'} came back to it` +
      (orphans > 0 ? `, ${orphans} of them answering no call shown here` : ''),
  },
  zh: {
    words: (n: number) => `第 ${n} 轮，策略模型自己的话`,
    reasoning: (n: number) => `第 ${n} 轮，策略模型的推理`,
    call: (n: number, k: number, tool: string) => `第 ${n} 轮，策略模型的第 ${k} 次调用：工具 "${tool}"，参数如下`,
    result: (n: number, k: number, tool: string) =>
      `第 ${n} 轮，策略模型收到的工具结果（不是它的话）：工具 "${tool}" 对第 ${k} 次调用的返回`,
    orphan: (n: number, tool: string | undefined) =>
      `第 ${n} 轮，策略模型收到的工具结果（不是它的话）${tool ? `，来自工具 "${tool}"` : ''}，不对应此处任何调用`,
    user: (n: number) => `第 ${n} 轮，用户消息`,
    system: (n: number) => `第 ${n} 轮，系统消息`,
    tagged: (tag: string) => `（数据，标记为 ${tag}）：`,
    summary: (calls: string[], results: number, orphans: number) =>
      (calls.length === 0 ? '策略模型没有调用任何工具' : `策略模型调用了 ${calls.length} 次工具（${tally(calls)}）`) +
      `；它收到 ${results} 个工具结果` +
      (orphans > 0 ? `，其中 ${orphans} 个不对应此处任何调用` : ''),
  },
} as const

/** `search ×2, calculator ×1`, in first-call order. */
function tally(names: readonly string[]): string {
  const counts = new Map<string, number>()
  for (const name of names) counts.set(name, (counts.get(name) ?? 0) + 1)
  return [...counts].map(([name, count]) => `${name} ×${count}`).join(', ')
}

/** A call waiting for its result: its number in the trajectory, its id and tool. */
interface OpenCall {
  number: number
  id: string | undefined
  name: string
}

/**
 * The call a tool result answers: the one with its `tool_call_id`, else the first open call of its tool (TRL names
 * the tool only), else the first open call; undefined when none is open.
 */
function answeredCall(open: OpenCall[], message: Extract<TrajectoryMessage, { role: 'tool' }>): OpenCall | undefined {
  const index = message.tool_call_id
    ? open.findIndex((call) => call.id === message.tool_call_id)
    : message.name
      ? open.findIndex((call) => call.name === message.name)
      : 0
  return index < 0 || index >= open.length ? undefined : open.splice(index, 1)[0]
}

/**
 * The turns after the task, each a data block introduced by who wrote it, and a one-line account of the tool use the
 * trajectory really holds (written by the harness, so a claimed call cannot pass for a made one).
 * @example const { turns, toolSummary } = await renderTrajectoryTurns(rollout.messages, 'en')
 */
export async function renderTrajectoryTurns(
  messages: readonly TrajectoryMessage[],
  locale: Locale,
): Promise<{ turns: string; toolSummary: string }> {
  const lines = LINES[locale]
  const blocks: { intro: string; text: string }[] = []
  const open: OpenCall[] = []
  const calls: string[] = []
  let results = 0
  let orphans = 0
  messages.slice(taskLength(messages)).forEach((message, index) => {
    const n = index + 1
    if (message.role === 'assistant') {
      const reasoning = message.reasoning_content ?? message.reasoning ?? ''
      if (reasoning !== '') blocks.push({ intro: lines.reasoning(n), text: reasoning })
      const words = contentText(message.content)
      if (words !== '' || !message.tool_calls?.length) blocks.push({ intro: lines.words(n), text: words })
      for (const call of message.tool_calls ?? []) {
        calls.push(call.function.name)
        open.push({ number: calls.length, id: call.id ?? undefined, name: call.function.name })
        blocks.push({ intro: lines.call(n, calls.length, call.function.name), text: toolArguments(call) })
      }
    } else if (message.role === 'tool') {
      results++
      const call = answeredCall(open, message)
      if (!call) orphans++
      const intro = call
        ? lines.result(n, call.number, message.name ?? call.name)
        : lines.orphan(n, message.name ?? undefined)
      blocks.push({ intro, text: contentText(message.content) })
    } else {
      blocks.push({
        intro: message.role === 'user' ? lines.user(n) : lines.system(n),
        text: contentText(message.content),
      })
    }
  })
  const rendered = await Promise.all(
    blocks.map(async ({ intro, text }) => {
      const tag = await dataBoundary(text)
      return `${intro} ${lines.tagged(tag)}\n<<<DATA-${tag}\n${text}\nDATA-${tag}>>>`
    }),
  )
  return { turns: rendered.join('\n\n'), toolSummary: lines.summary(calls, results, orphans) }
}

/**
 * A trajectory as one candidate text for a verifier that reads an answer as one block (`/rm/<target>/score`): the
 * harness's count of tool use, then each turn in its own inner block under its speaker, which no turn can close.
 * @example candidate.text = await trajectoryForVerifier(request.candidate.messages, 'en')
 */
export async function trajectoryForVerifier(messages: readonly TrajectoryMessage[], locale: Locale): Promise<string> {
  const { turns, toolSummary } = await renderTrajectoryTurns(messages, locale)
  const heading = locale === 'zh' ? '由评分系统统计的工具使用情况：' : 'Tool use, counted by the grading harness: '
  return `${heading}${toolSummary}.\n\n${turns}`
}
