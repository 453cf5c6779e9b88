/**
 * Judging a pair over a library (RewardHarness §2, with its defects fixed):
 * - `LibraryRouter` picks entries from the instruction only; cached per (instruction, library state), so swapped
 *   copies and validation re-runs cost no extra call. A router that fails after retries uses no entries for that
 * judgment (counted, not cached).
 * - `judgeWithLibrary` runs the Sub-Agent's turn loop: each turn is a JSON object with `think` and either a
 *   `tool` call or the `answer`. A tool call really runs the tool: its SKILL.md body is the system prompt of a
 *   sub-call that receives the same instruction and answers the Sub-Agent saw, plus its query. The observation is
 *   fed back and kept in the chain. Parse errors (after retries) and LLM errors are FAILURES, never ties.
 * - Images (images.ts): an item's images are handles; the Sub-Agent's user message carries them as OpenAI vision
 *   parts, and a tool's sub-call gets the same images, resolved from the handle registry at call time (a tool call may
 *   name a subset by label). What the model writes is never used as image data.
 * - `judgeBothOrders` judges A/B and B/A; only agreeing orders give a verdict, disagreement is `inconsistent`.
 */
import { z } from 'zod'
import { dataBoundary, parseLenientJson, parseReplyAs, runAgent } from '../agents/run-agent.ts'
import { entryList, type Library, libraryHash } from '../library/index.ts'
import { withRetry, type RetryPolicy } from '../llm/retry.ts'
import { LlmError, type ChatMessage, type ChatModel, type ChatRequest, visionMessage } from '../llm/types.ts'
import { jsonMockReply } from '../llm/mock.ts'
import { closedObject } from '../llm/response-format.ts'
import { answerLibraryJudge, answerLibraryRoute, answerLibraryTool, type LibraryJudgeInput } from './mock.ts'
import type { LibraryEntrySummary } from './views.ts'
import { renderPrompt, type Locale } from '../prompts/index.ts'
import {
  type ImageResolver,
  imageParts,
  type ItemImages,
  type PresentedImage,
  presentedImages,
  swapImages,
} from './images.ts'

type PairLabel = 'A' | 'B' | 'tie'

/** One pairwise item: an instruction and two answers, `label` the better one (never shown to a model). */
export interface PairItem {
  id: string
  instruction: string
  first: string
  second: string
  label: PairLabel
  /** Image handles of the instruction and of each answer (see images.ts); resolved with `JudgeOptions.images`. */
  images?: ItemImages
  /** The dataset's reference answer for the instruction, shown to the judge as data; never a label. */
  reference?: string
}

/** What a judgment sees of an item: the texts, and the image handles if any. */
export type JudgedItem = Pick<PairItem, 'instruction' | 'first' | 'second' | 'images' | 'reference'>

export interface JudgeOptions {
  locale?: Locale
  retry?: Partial<RetryPolicy>
  /** Tool calls allowed per judgment (default 3); a tool requested beyond it is a failure. */
  maxToolCalls?: number
  /** Resolves items' image handles at call time; needed when an item has images. */
  images?: ImageResolver
}

/** What one judged order is worth to the answer it was judged for, in a win rate: win 1, tie 0.5, loss 0. */
export const OUTCOME_VALUE = { win: 1, tie: 0.5, loss: 0 } as const
export type OrderOutcome = keyof typeof OUTCOME_VALUE

/** A verdict, or a counted failure. `chain` holds every turn and every tool observation. */
export type JudgeOutcome =
  | { ok: true; preference: PairLabel; reason: string; chain: string; tool_calls: number; entries: string[] }
  | { ok: false; failure: string; chain: string; tool_calls: number; entries: string[] }

/** A model that can drop a reply its caller could not parse (the offline reply cache): retries then ask again. */
interface ParsingModel extends ChatModel {
  completeParsed<T>(request: ChatRequest, parse: (reply: { text: string }) => T | Promise<T>): Promise<T>
}

/**
 * `runAgent`, except that a model with `completeParsed` (the offline reply cache) evicts a reply that does not
 * parse, so a retry asks the model again instead of replaying the broken reply.
 * @example const reply = await askParsed(model, request, parseTurn, { maxAttempts: 3 })
 */
export async function askParsed<T>(
  model: ChatModel,
  request: ChatRequest,
  parse: (text: string) => T,
  retry?: Partial<RetryPolicy>,
): Promise<T> {
  const parsing = model as Partial<ParsingModel>
  if (typeof parsing.completeParsed !== 'function') return runAgent(model, request, parse, retry)
  return withRetry(() => (parsing as ParsingModel).completeParsed(request, (reply) => parse(reply.text)), retry)
}

const summaries = (library: Library): LibraryEntrySummary[] =>
  entryList(library).map(({ name, kind, description }) => ({ name, kind, description }))

/**
 * Picks library entries for an instruction (never sees the answers), cached per (instruction, library state).
 * @example const names = await new LibraryRouter(model).route(lib, 'Summarise the report')
 */
export class LibraryRouter {
  readonly #cache = new Map<string, Promise<string[]>>()
  /** Router calls made (cache misses), and how many failed after retries. */
  calls = 0
  failures = 0

  constructor(
    private readonly model: ChatModel,
    private readonly options: JudgeOptions = {},
  ) {}

  /**
   * Entry names to use for `instruction`: existing names only, deduplicated, in library order.
   * @example await router.route(lib, item.instruction) // ['instruction-coverage']
   */
  async route(library: Library, instruction: string): Promise<string[]> {
    const entries = summaries(library)
    if (entries.length === 0) return []
    const key = JSON.stringify([await libraryHash(library), instruction])
    let routed = this.#cache.get(key)
    if (!routed) {
      // A failed routing is not cached: the next judgment of this instruction asks again.
      routed = this.#route(entries, instruction).then((names) => {
        if (names === undefined) this.#cache.delete(key)
        return names ?? []
      })
      this.#cache.set(key, routed)
    }
    return routed
  }

  async #route(entries: LibraryEntrySummary[], instruction: string): Promise<string[] | undefined> {
    const locale = this.options.locale ?? 'en'
    const boundary = await dataBoundary(instruction)
    const request: ChatRequest = {
      role: 'judge',
      messages: [
        { role: 'system', content: renderPrompt(locale, 'library-router.system', {}) },
        {
          role: 'user',
          content: renderPrompt(locale, 'library-router.user', {
            boundary,
            instruction,
            entries: entries.map((entry) => `- ${entry.name} (${entry.kind}): ${entry.description}`).join('\n'),
          }),
        },
      ],
      task: 'library_route',
      json: true,
      mock: jsonMockReply(answerLibraryRoute, { instruction, entries }),
    }
    this.calls++
    try {
      const reply = await askParsed(
        this.model,
        request,
        (text) => parseReplyAs(RouterReply, text, 'library router'),
        this.options.retry,
      )
      const known = new Set(entries.map((entry) => entry.name))
      const chosen = new Set(reply.entries.filter((name) => known.has(name)))
      return entries.map((entry) => entry.name).filter((name) => chosen.has(name))
    } catch {
      this.failures++
      return undefined
    }
  }
}

const RouterReply = z.object({ entries: z.array(z.string()) })

/**
 * `a`, ` B `, `Tie`, `TIE` read as A / B / tie; anything else is refused (an invalid reply, retried then a failure).
 */
const Preference = z.preprocess(
  (value) => {
    if (typeof value !== 'string') return value
    const word = value.trim()
    return word.toLowerCase() === 'tie' ? 'tie' : word.toUpperCase()
  },
  z.enum(['A', 'B', 'tie']),
)

const TurnReply = z.union([
  z.object({
    think: z.string().optional(),
    answer: z.object({ preference: Preference, reason: z.string().default('') }),
  }),
  z.object({
    think: z.string().optional(),
    tool: z.object({ name: z.string(), query: z.string().default(''), images: z.array(z.string()).optional() }),
  }),
])
type TurnReply = z.infer<typeof TurnReply>

/**
 * Reads one Sub-Agent turn: `{think, answer: {preference, reason}}` or `{think, tool: {name, query}}`.
 * @example parseTurn('{"answer": {"preference": "B", "reason": "r"}}') // { answer: { preference: 'B', reason: 'r' } }
 * @internal
 */
export function parseTurn(text: string): TurnReply {
  return parseReplyAs(TurnReply, text, 'library sub-agent')
}

/**
 * Judges one pair with the entries the router picked. Never throws for model trouble: a failure is returned
 * as `{ok: false}` so callers count it.
 * @example const outcome = await judgeWithLibrary(model, lib, ['coverage-check'], item)
 */
export async function judgeWithLibrary(
  model: ChatModel,
  library: Library,
  routed: readonly string[],
  item: JudgedItem,
  options: JudgeOptions = {},
): Promise<JudgeOutcome> {
  const locale = options.locale ?? 'en'
  const maxToolCalls = options.maxToolCalls ?? 3
  const { skills, tools, entries } = pickEntries(library, routed)
  let images: Awaited<ReturnType<typeof imageParts>>
  try {
    images = await itemImageParts(item, options.images, locale)
  } catch (error) {
    return { ok: false, failure: 'image', chain: `[failure] ${describe(error)}`, tool_calls: 0, entries }
  }
  const messages = await openingMessages(item, { skills, tools, images, locale, maxToolCalls })
  const observations: { tool: string; text: string }[] = []
  const chain: string[] = []
  let toolCalls = 0
  const failed = (failure: string, line: string): JudgeOutcome => {
    chain.push(line)
    return { ok: false, failure, chain: chain.join('\n'), tool_calls: toolCalls, entries }
  }
  for (;;) {
    const request = turnRequest(messages, {
      instruction: item.instruction,
      first: item.first,
      second: item.second,
      skills,
      tools,
      observations: [...observations],
      max_tool_calls: maxToolCalls - toolCalls,
    })
    let raw = ''
    let turn: TurnReply
    try {
      turn = await askParsed(
        model,
        request,
        (text) => {
          raw = text
          return parseTurn(text)
        },
        options.retry,
      )
    } catch (error) {
      return failed(error instanceof LlmError ? error.kind : 'error', `[failure] ${describe(error)}`)
    }
    if (turn.think) chain.push(`[think] ${turn.think}`)
    if ('answer' in turn) {
      chain.push(`[answer] ${turn.answer.preference}: ${turn.answer.reason}`)
      const { preference, reason } = turn.answer
      return { ok: true, preference, reason, chain: chain.join('\n'), tool_calls: toolCalls, entries }
    }
    const { name, query } = turn.tool
    chain.push(
      `[tool] ${name}: ` +
        `${query}${turn.tool.images ? ` (images asked: ${turn.tool.images.map(shortLabel).join(', ')})` : ''}`,
    )
    if (toolCalls >= maxToolCalls) return failed('tool_limit', '[failure] tool call beyond the limit')
    toolCalls++
    const routedTool = tools.some((tool) => tool.name === name) ? name : undefined
    const call = await callTool(model, library, routedTool, name, item, query, { ...options, locale }, turn.tool.images)
    const observation = call.observation
    if (call.images.length > 0) chain.push(`[tool input ${name}] images ${call.images.join(', ')}`)
    chain.push(`[observation ${name}] ${observation}`)
    observations.push({ tool: name, text: observation })
    messages.push({ role: 'assistant', content: raw })
    messages.push({
      role: 'user',
      content: renderPrompt(locale, 'library-observation.user', {
        boundary: await dataBoundary(observation),
        tool: name,
        observation,
      }),
    })
  }
}

/**
 * The reply of a turn that can only answer: `{answer: {preference, reason}}`. Sent as the turn's schema, so a server
 * that enforces one (and a small model behind it) writes a verdict rather than any JSON.
 */
const ANSWER_SCHEMA = closedObject({
  answer: closedObject({
    preference: { type: 'string', enum: ['A', 'B', 'tie'] },
    reason: { type: 'string', maxLength: 300 },
  }),
})

/**
 * One sub-agent turn's request: the conversation so far, and the mock's view of the same turn. A turn with no tool
 * left to call carries the answer's schema; one that may call a tool carries none (a schema of either shape is not
 * one that every server takes at its root).
 */
function turnRequest(messages: readonly ChatMessage[], turn: LibraryJudgeInput): ChatRequest {
  const answerOnly = turn.tools.length === 0 || turn.max_tool_calls <= 0
  return {
    role: 'judge',
    messages: [...messages],
    task: 'library_judge',
    json: true,
    mock: jsonMockReply(answerLibraryJudge, turn),
    ...(answerOnly ? { jsonSchema: { name: 'library_verdict', schema: ANSWER_SCHEMA } } : {}),
  }
}

/** The item's images as vision parts; throws when it has images but the judge has no registry to resolve them. */
async function itemImageParts(
  item: JudgedItem,
  registry: JudgeOptions['images'],
  locale: Locale,
): Promise<Awaited<ReturnType<typeof imageParts>>> {
  const shown = presentedImages(item.images)
  if (shown.length > 0 && !registry) throw new Error('the item has images but the judge has no image registry')
  return registry ? imageParts(registry, shown, locale) : []
}

/** The routed entries that exist in the library: skills with their bodies, tools with when to use them. */
function pickEntries(library: Library, routed: readonly string[]) {
  const picked = routed.map((name) => library.entries[name]).filter((entry) => entry !== undefined)
  return {
    skills: picked.filter((entry) => entry.kind === 'skill').map((entry) => ({ name: entry.name, body: entry.body })),
    tools: picked
      .filter((entry) => entry.kind === 'tool')
      .map((entry) => ({ name: entry.name, when_to_use: entry.when_to_use ?? entry.description })),
    entries: picked.map((entry) => entry.name),
  }
}

/** The sub-agent's first two messages: the routed skills and tools as its system prompt, the pair (and images). */
async function openingMessages(
  item: JudgedItem,
  context: {
    skills: { name: string; body: string }[]
    tools: { name: string; when_to_use: string }[]
    images: Awaited<ReturnType<typeof imageParts>>
    locale: Locale
    maxToolCalls: number
  },
): Promise<ChatMessage[]> {
  const { skills, tools, images, locale } = context
  const none = locale === 'zh' ? '（无）' : '(none)'
  const boundary = await dataBoundary(item.instruction, item.reference ?? '', item.first, item.second)
  const userText = renderPrompt(locale, 'library-judge.user', {
    boundary,
    instruction: item.instruction,
    reference: item.reference ?? '',
    first: item.first,
    second: item.second,
  })
  return [
    {
      role: 'system',
      content: renderPrompt(locale, 'library-judge.system', {
        max_tool_calls: context.maxToolCalls,
        skills: skills.length ? skills.map((skill) => `## Skill: ${skill.name}\n${skill.body}`).join('\n') : none,
        tools: tools.length
          ? tools.map((tool) => `## Tool: ${tool.name}\nWhen to use: ${tool.when_to_use}`).join('\n\n')
          : none,
      }),
    },
    images.length > 0
      ? visionMessage('user', [
          { type: 'text', text: userText },
          ...images,
          ...(tools.length > 0 ? [{ type: 'text' as const, text: TOOL_IMAGES_NOTE[locale] }] : []),
        ])
      : { role: 'user', content: userText },
  ]
}

/** What a tool sub-call gave: the observation text, whether the tool replied with JSON, and the image labels it got. */
export interface ToolCall {
  observation: string
  /**
   * `json`: the reply parsed as JSON; `raw`: it did not; `error`: no reply (unknown tool, bad image labels, failed
   * call).
   */
  status: 'json' | 'raw' | 'error'
  /** Labels of the images the sub-call received. */
  images: string[]
}

/**
 * Runs a tool: its SKILL.md body as the system prompt, the same instruction, answers and images as the Sub-Agent
 * (or the images `asked` names, by label), and the query. The images are resolved from the handle registry now;
 * a label the item does not have (base64 copied into the reply, say) is refused, never sent. The observation is the
 * reply (a JSON object re-serialized; anything else as `{"raw": …}`), or `{"error": …}`: data for the Sub-Agent, not a
 * failure of the judgment.
 * @example const { observation, status } = await callTool(model, lib, 'coverage-check', 'coverage-check', item, 'Which
 *   covers more?', { locale: 'en' })
 */
export async function callTool(
  model: ChatModel,
  library: Library,
  known: string | undefined,
  name: string,
  item: JudgedItem,
  query: string,
  options: JudgeOptions = {},
  asked?: readonly string[],
): Promise<ToolCall> {
  const locale = options.locale ?? 'en'
  const error = (message: string): ToolCall => ({
    observation: JSON.stringify({ error: message }),
    status: 'error',
    images: [],
  })
  const entry = known ? library.entries[known] : undefined
  if (entry?.kind !== 'tool') return error(`no routed tool named ${name}`)
  const shown = presentedImages(item.images)
  let sent: PresentedImage[] = shown
  if (asked) {
    const unknown = asked.filter((label) => !shown.some((image) => image.label === label))
    if (unknown.length > 0) {
      return error(
        `unknown image handle${unknown.length > 1 ? 's' : ''} ${unknown.map(shortLabel).join(', ')}: name images by ` +
          `their labels (${shown.map((image) => image.label).join(', ') || 'this item has none'})`,
      )
    }
    sent = shown.filter((image) => asked.includes(image.label))
  }
  const boundary = await dataBoundary(item.instruction, item.first, item.second, query)
  const userText = renderPrompt(locale, 'library-tool.user', {
    boundary,
    instruction: item.instruction,
    first: item.first,
    second: item.second,
    query,
  })
  let user: ChatMessage = { role: 'user', content: userText }
  if (sent.length > 0) {
    try {
      if (!options.images) throw new Error('the item has images but the judge has no image registry')
      user = visionMessage('user', [
        { type: 'text', text: userText },
        ...(await imageParts(options.images, sent, locale)),
      ])
    } catch (failure) {
      return error(describe(failure))
    }
  }
  const request: ChatRequest = {
    role: 'judge',
    messages: [{ role: 'system', content: entry.body }, user],
    task: 'library_tool',
    json: true,
    mock: jsonMockReply(answerLibraryTool, { instruction: item.instruction, first: item.first, second: item.second }),
  }
  const images = sent.map((image) => image.label)
  try {
    const reply = await askParsed(model, request, (text) => text, options.retry)
    let parsed: unknown
    try {
      parsed = parseLenientJson(reply)
    } catch {
      parsed = undefined
    }
    // Only a JSON object counts: the lenient parser's repair turns plain prose into a JSON string.
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed))
      return { observation: JSON.stringify(parsed), status: 'json', images }
    return { observation: JSON.stringify({ raw: reply.slice(0, 2000) }), status: 'raw', images }
  } catch (failure) {
    return { ...error(describe(failure)), images }
  }
}

/** Said after the images when tools are routed: tools see the same images, a subset may be named by label. */
const TOOL_IMAGES_NOTE: Record<Locale, string> = {
  en:
    'A tool you call receives these same images. To send only some, add "images": ["<label>", …] to the tool call, ' +
    'naming the labels above (never image data).',
  zh: '你调用的工具会收到同样的图片。若只想发送部分图片，在工具调用中加上 "images": ["<标签>", …]，写上面的标签（不要写图片数据）。',
}

/** A label as logs show it: cut when long (a model may paste image data where a label belongs). */
function shortLabel(label: string): string {
  return JSON.stringify(label.length > 24 ? `${label.slice(0, 21)}…` : label)
}

/** The verdict of judging both presentation orders. */
export interface BothOrdersOutcome {
  /** `consistent`: both orders agree; `inconsistent`: both answered but disagree; `failure`: an order failed. */
  verdict: 'consistent' | 'inconsistent' | 'failure'
  /** The agreed preference (consistent only). */
  preference: PairLabel | null
  /** Each order's preference in the item's own positions (B/A's mapped back); null where that order failed. */
  orders: { ab: PairLabel | null; ba: PairLabel | null }
  /** The first order's failure kind, when an order failed. */
  failure?: string
  /** Both chains, each under its order's heading. */
  chain: string
  tool_calls: number
  entries: string[]
}

const FLIP = { A: 'B', B: 'A', tie: 'tie' } as const

/**
 * Judges an item as presented (A/B) and with the answers exchanged (B/A, images too). The verdict stands only when
 * both orders agree; disagreement is `inconsistent` (position bias shown, never read as a tie), and a failure in
 * either order is a failure.
 * @example const outcome = await judgeBothOrders(model, lib, routed, item); outcome.verdict // 'consistent'
 */
export async function judgeBothOrders(
  model: ChatModel,
  library: Library,
  routed: readonly string[],
  item: JudgedItem,
  options: JudgeOptions = {},
): Promise<BothOrdersOutcome> {
  const ab = await judgeWithLibrary(model, library, routed, item, options)
  const swapped: JudgedItem = {
    instruction: item.instruction,
    first: item.second,
    second: item.first,
    ...(item.images ? { images: swapImages(item.images)! } : {}),
    ...(item.reference === undefined ? {} : { reference: item.reference }),
  }
  const ba = await judgeWithLibrary(model, library, routed, swapped, options)
  const orders = { ab: ab.ok ? ab.preference : null, ba: ba.ok ? FLIP[ba.preference] : null }
  const chain = `[order A/B]\n${ab.chain}\n[order B/A: the answers exchanged]\n${ba.chain}`
  const common = { orders, chain, tool_calls: ab.tool_calls + ba.tool_calls, entries: ab.entries }
  if (!ab.ok || !ba.ok)
    return {
      verdict: 'failure',
      preference: null,
      failure: !ab.ok ? ab.failure : (ba as { failure: string }).failure,
      ...common,
    }
  if (orders.ab !== orders.ba) return { verdict: 'inconsistent', preference: null, ...common }
  return { verdict: 'consistent', preference: orders.ab, ...common }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
