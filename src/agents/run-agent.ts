import { jsonrepair } from 'jsonrepair'
import { LRUCache } from 'lru-cache'
import { z } from 'zod'
import { sha256Hex } from '../hash/index.ts'
import { retry, type RetryPolicy } from '../llm/retry.ts'
import { LlmError, type ChatModel, type ChatRequest } from '../llm/types.ts'
import type { Locale } from '../prompts/index.ts'
import type { TrainingStage } from '../schemas/agents.ts'
import type { Rubric } from '../schemas/rubric.ts'
import { copiedPlaceholder, withoutEmptyEntries } from './placeholders.ts'

/**
 * Parses JSON a model wrote: strips code fences and prose around the object, repairs what jsonrepair can.
 * @example parseLenientJson('```json\n{"a": 1,}\n```') // { a: 1 }
 */
export function parseLenientJson(text: string): unknown {
  const fenced = text.match(/```(?:json)?\s*([\s\S]*?)```/)
  const candidate = (fenced?.[1] ?? text).trim()
  const start = candidate.indexOf('{')
  const body = start >= 0 ? candidate.slice(start) : candidate
  try {
    return JSON.parse(body)
  } catch {
    try {
      return JSON.parse(jsonrepair(body))
    } catch {
      throw new LlmError(
        'invalid_reply',
        `reply is not JSON and could not be repaired: ${JSON.stringify(text.slice(0, 120))}`,
      )
    }
  }
}

/**
 * Reads an agent's reply into `schema`: lenient JSON (fences, trailing commas, prose before or after
 * the object), then validation. Anything that does not fit is an `invalid_reply`, which `runAgent` retries.
 * @example parseReplyAs(QueryList, '```json\n{"queries": ["a",]}\n```', 'query generator') // { queries: ['a'] }
 */
export function parseReplyAs<S extends z.ZodType>(schema: S, text: string, agent: string): z.output<S> {
  const parsed = schema.safeParse(parseAgentJson(text))
  if (!parsed.success)
    throw new LlmError('invalid_reply', `${agent} reply has the wrong shape: ${z.prettifyError(parsed.error)}`)
  return parsed.data
}

function parseAgentJson(text: string): unknown {
  let value: unknown
  let failure: unknown
  try {
    value = parseLenientJson(text)
    if (isObject(value)) return value
  } catch (error) {
    failure = error
  }
  // Prose after the object ("{…} Hope this helps!") either defeats the repair or turns the reply into
  // a list of values; cut at the last brace and try once more.
  const end = text.lastIndexOf('}')
  if (end >= 0) {
    try {
      const trimmed = parseLenientJson(text.slice(0, end + 1))
      if (isObject(trimmed)) return trimmed
    } catch {
      // fall through to the first outcome
    }
  }
  if (failure !== undefined) throw failure
  return value
}

const isObject = (value: unknown): boolean => typeof value === 'object' && value !== null && !Array.isArray(value)

/**
 * One agent call: complete → parse (repair + validate) → retry invalid replies and transport
 * failures with backoff. A reply that copies a placeholder of its prompt's reply shape (`"<2-4 sentences>"`) is an
 * invalid reply too, but for a list entry that is only a placeholder: that entry is left out, as empty. The attempt
 * after an invalid reply is the one before it grown by that reply and what was wrong with it (a copied placeholder,
 * a shape or a contract it broke); an attempt after a transport failure sends the same prompt again. A reply cut at
 * `max_tokens` is asked again once at once with twice the room (a role's own `max_tokens` still wins), and refused if
 * cut again: the same room would only cut it again, and a cut reply is never parsed into a grade. A refused reply is
 * a failed call in the call log (`invalid_reply`), though the server answered it.
 * @example const analysis = await runAgent(model, request, parseAnalyzerReply, { maxAttempts: 3 })
 */
export async function runAgent<T>(
  model: ChatModel,
  request: ChatRequest,
  parse: (text: string) => T,
  policy: Partial<RetryPolicy> = {},
): Promise<T> {
  let current = request
  let widened = false
  const system = request.messages.find((message) => message.role === 'system')?.content ?? ''
  return retry(
    async () => {
      const response = await model.complete(current)
      let copied: ReturnType<typeof copiedPlaceholder>
      try {
        const reply = parse(withoutEmptyEntries(response.text, system, parseLenientJson))
        copied = copiedPlaceholder(reply, system)
        if (copied)
          throw new LlmError(
            'invalid_reply',
            `${request.role} reply copies its prompt's placeholder at ${copied.path || 'its top'}: ` +
              JSON.stringify(copied.text.slice(0, 80)),
          )
        return reply
      } catch (error) {
        if (!(error instanceof LlmError)) throw error
        // The server answered, but the answer is of no use: the call log counts it failed.
        response.refuse?.(error.kind)
        // Asked the same at temperature 0, a model writes the same reply again (a search's proposer returned its
        // parent unchanged four times over): the next attempt is this one grown by the reply and what was wrong
        // with it, so no attempt repeats an earlier prompt, and the server still reuses its prefix.
        if (error.kind === 'invalid_reply')
          current = {
            ...current,
            messages: [...current.messages, ...reask(response.text, error, copied, request.json)],
          }
        throw error
      }
    },
    (error) => {
      const failure =
        error instanceof LlmError ? error : new LlmError('network', String((error as Error)?.message ?? error))
      const cutAt = failure.details.cutAtMaxTokens
      if (cutAt === undefined)
        return { error: failure, retryable: failure.retryable, retryAfterSeconds: failure.retryAfterSeconds }
      if (widened) return { error: failure, retryable: false }
      widened = true
      current = { ...current, maxTokens: cutAt * 2 }
      return { error: failure, retryable: true, delayMs: 0 }
    },
    policy,
  )
}

/** The turns that ask again after an invalid reply: the reply, then what was wrong with it (a verdict is no JSON). */
function reask(
  reply: string,
  refusal: LlmError,
  copied: ReturnType<typeof copiedPlaceholder>,
  json: boolean,
): ChatRequest['messages'] {
  const whole = json ? ' with the whole JSON object' : ''
  const wrong = copied
    ? `That reply copied the reply shape's placeholder ${JSON.stringify(copied.text.slice(0, 80))} ` +
      `${copied.path ? `at ${copied.path}` : 'as the whole reply'} instead of answering. Reply again${whole}, ` +
      'every field in your own words.'
    : `That reply was refused: ${refusal.message.slice(0, 600)}. Reply again${whole}, corrected.`
  return [
    { role: 'assistant', content: reply },
    { role: 'user', content: wrong },
  ]
}

/**
 * The tag of a request's data markers (`<<<DATA-<tag>` … `DATA-<tag>>>`): the first 16 hex digits of
 * a hash of all untrusted text the request carries, so that text cannot forge its own closing marker.
 * @example const boundary = await dataBoundary(rollout.input, rollout.output)
 */
export async function dataBoundary(...parts: string[]): Promise<string> {
  if (parts.length !== 1) return (await sha256Hex(parts.join('\u0000'))).slice(0, 16)
  const text = parts[0]!
  let boundary = recentBoundaries.get(text)
  if (boundary === undefined) {
    boundary = (await sha256Hex(text)).slice(0, 16)
    recentBoundaries.set(text, boundary)
  }
  return boundary
}

/**
 * Boundaries of single blocks hashed lately: a prompt's block recurs for every answer of its group, an answer's for
 * every rubric that grades it. Bounded by the characters it keeps alive.
 */
const recentBoundaries = new LRUCache<string, string>({
  maxSize: 2_000_000,
  sizeCalculation: (_, text) => text.length + 1,
})

const LABELS = {
  en: { anchor: 'anchor', adaptive: 'adaptive', none: '(none)', early: 'early', middle: 'middle', late: 'late' },
  zh: { anchor: '锚定', adaptive: '自适应', none: '（无）', early: '早期', middle: '中期', late: '后期' },
} as const satisfies Record<Locale, Record<string, string>>

/** How prompts mark a penalty rubric's text; an updater that echoes it back still means a penalty. */
export const PENALTY_LABEL = '[PENALTY] '

/**
 * Rubrics as prompt lines, `- <id> (<kind>, weight <w>): <text>`; a localised "(none)" for an empty list.
 * @example rubricLines([anchor], 'en') // '- a1 (anchor, weight 2): The final answer is correct.'
 */
export function rubricLines(rubrics: readonly Rubric[], locale: Locale): string {
  const labels = LABELS[locale]
  if (rubrics.length === 0) return labels.none
  return rubrics
    .map(
      (rubric) =>
        `- ${rubric.id} (${rubric.is_anchor ? labels.anchor : labels.adaptive}, weight ${rubric.weight}): ` +
        `${rubric.kind === 'penalty' ? PENALTY_LABEL : ''}${rubric.text}`,
    )
    .join('\n')
}

/**
 * The localised name of a training stage.
 * @example stageLabel('zh', 'early') // '早期'
 */
export function stageLabel(locale: Locale, stage: TrainingStage): string {
  return LABELS[locale][stage]
}

/**
 * `text`, or the localised "(none)" when it is blank: an empty data block reads as nothing forgotten.
 * @example orNone('en', '') // '(none)'
 */
export function orNone(locale: Locale, text: string): string {
  return text.trim() ? text : LABELS[locale].none
}

/**
 * A score in [0, 1] as prompts show it.
 * @example formatScore(0.8333) // '0.833'
 */
export function formatScore(score: number): string {
  return score.toFixed(3)
}
