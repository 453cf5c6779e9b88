/**
 * Judging a pair over a library (RewardHarness §2, with its defects fixed):
 * - `LibraryRouter` picks entries from the instruction only; cached per (instruction, library state), so swapped
 *   copies and validation re-runs cost no extra call. A router that fails after retries uses no entries for that judgment (counted, not cached).
 * - `judgeWithLibrary` runs the Sub-Agent's turn loop: each turn is a JSON object with `think` and either a
 *   `tool` call or the `answer`. A tool call really runs the tool: its SKILL.md body is the system prompt of a
 *   sub-call that receives the same instruction and answers the Sub-Agent saw, plus its query. The observation is
 *   fed back and kept in the chain. Parse errors (after retries) and LLM errors are FAILURES, never ties.
 */
import { z } from 'zod'
import { dataBoundary, parseLenientJson, parseReplyAs, runAgent } from '../agents/run-agent.ts'
import { entryList, type Library, libraryHash } from '../library/index.ts'
import { withRetry, type RetryPolicy } from '../llm/retry.ts'
import { LlmError, type ChatMessage, type ChatModel, type ChatRequest, type LibraryEntrySummary } from '../llm/types.ts'
import { renderPrompt, type Locale } from '../prompts/index.ts'

export type PairLabel = 'A' | 'B' | 'tie'

/** One pairwise item: an instruction and two answers, `label` the better one (never shown to a model). */
export interface PairItem {
  id: string
  instruction: string
  first: string
  second: string
  label: PairLabel
}

export interface JudgeOptions {
  locale?: Locale
  retry?: Partial<RetryPolicy>
  /** Tool calls allowed per judgment (default 3); a tool requested beyond it is a failure. */
  maxToolCalls?: number
}

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
export async function askParsed<T>(model: ChatModel, request: ChatRequest, parse: (text: string) => T, retry?: Partial<RetryPolicy>): Promise<T> {
  const parsing = model as Partial<ParsingModel>
  if (typeof parsing.completeParsed !== 'function') return runAgent(model, request, parse, retry)
  return withRetry(() => (parsing as ParsingModel).completeParsed(request, (reply) => parse(reply.text)), retry)
}

const summaries = (library: Library): LibraryEntrySummary[] => entryList(library).map(({ name, kind, description }) => ({ name, kind, description }))

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
        { role: 'user', content: renderPrompt(locale, 'library-router.user', { boundary, instruction, entries: entries.map((entry) => `- ${entry.name} (${entry.kind}): ${entry.description}`).join('\n') }) },
      ],
      task: { kind: 'library_route', instruction, entries },
      json: true,
    }
    this.calls++
    try {
      const reply = await askParsed(this.model, request, (text) => parseReplyAs(RouterReply, text, 'library router'), this.options.retry)
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

/** `a`, ` B `, `Tie`, `TIE` read as A / B / tie; anything else is refused (an invalid reply, retried then a failure). */
const Preference = z.preprocess((value) => {
  if (typeof value !== 'string') return value
  const word = value.trim()
  return word.toLowerCase() === 'tie' ? 'tie' : word.toUpperCase()
}, z.enum(['A', 'B', 'tie']))

const TurnReply = z.union([
  z.object({ think: z.string().optional(), answer: z.object({ preference: Preference, reason: z.string().default('') }) }),
  z.object({ think: z.string().optional(), tool: z.object({ name: z.string(), query: z.string().default('') }) }),
])
type TurnReply = z.infer<typeof TurnReply>

/**
 * Reads one Sub-Agent turn: `{think, answer: {preference, reason}}` or `{think, tool: {name, query}}`.
 * @example parseTurn('{"answer": {"preference": "B", "reason": "r"}}') // { answer: { preference: 'B', reason: 'r' } }
 */
export function parseTurn(text: string): TurnReply {
  return parseReplyAs(TurnReply, text, 'library sub-agent')
}

/**
 * Judges one pair with the entries the router picked. Never throws for model trouble: a failure is returned
 * as `{ok: false}` so callers count it.
 * @example const outcome = await judgeWithLibrary(model, lib, ['coverage-check'], item)
 */
export async function judgeWithLibrary(model: ChatModel, library: Library, routed: readonly string[], item: Pick<PairItem, 'instruction' | 'first' | 'second'>, options: JudgeOptions = {}): Promise<JudgeOutcome> {
  const locale = options.locale ?? 'en'
  const maxToolCalls = options.maxToolCalls ?? 3
  const picked = routed.map((name) => library.entries[name]).filter((entry) => entry !== undefined)
  const skills = picked.filter((entry) => entry.kind === 'skill').map((entry) => ({ name: entry.name, body: entry.body }))
  const tools = picked.filter((entry) => entry.kind === 'tool').map((entry) => ({ name: entry.name, when_to_use: entry.when_to_use ?? entry.description }))
  const none = locale === 'zh' ? '（无）' : '(none)'
  const boundary = await dataBoundary(item.instruction, item.first, item.second)
  const messages: ChatMessage[] = [
    {
      role: 'system',
      content: renderPrompt(locale, 'library-judge.system', {
        max_tool_calls: maxToolCalls,
        skills: skills.length ? skills.map((skill) => `## Skill: ${skill.name}\n${skill.body}`).join('\n') : none,
        tools: tools.length ? tools.map((tool) => `## Tool: ${tool.name}\nWhen to use: ${tool.when_to_use}`).join('\n\n') : none,
      }),
    },
    { role: 'user', content: renderPrompt(locale, 'library-judge.user', { boundary, instruction: item.instruction, first: item.first, second: item.second }) },
  ]
  const observations: { tool: string; text: string }[] = []
  const chain: string[] = []
  const entries = picked.map((entry) => entry.name)
  let toolCalls = 0
  for (;;) {
    const request: ChatRequest = {
      role: 'judge',
      messages: [...messages],
      task: { kind: 'library_judge', instruction: item.instruction, first: item.first, second: item.second, skills, tools, observations: [...observations], max_tool_calls: maxToolCalls - toolCalls },
      json: true,
    }
    let raw = ''
    let turn: TurnReply
    try {
      turn = await askParsed(model, request, (text) => {
        raw = text
        return parseTurn(text)
      }, options.retry)
    } catch (error) {
      chain.push(`[failure] ${describe(error)}`)
      return { ok: false, failure: error instanceof LlmError ? error.kind : 'error', chain: chain.join('\n'), tool_calls: toolCalls, entries }
    }
    if (turn.think) chain.push(`[think] ${turn.think}`)
    if ('answer' in turn) {
      chain.push(`[answer] ${turn.answer.preference}: ${turn.answer.reason}`)
      return { ok: true, preference: turn.answer.preference, reason: turn.answer.reason, chain: chain.join('\n'), tool_calls: toolCalls, entries }
    }
    const { name, query } = turn.tool
    chain.push(`[tool] ${name}: ${query}`)
    if (toolCalls >= maxToolCalls) {
      chain.push('[failure] tool call beyond the limit')
      return { ok: false, failure: 'tool_limit', chain: chain.join('\n'), tool_calls: toolCalls, entries }
    }
    toolCalls++
    const observation = await runTool(model, library, tools.some((tool) => tool.name === name) ? name : undefined, name, item, query, locale, options.retry)
    chain.push(`[observation ${name}] ${observation}`)
    observations.push({ tool: name, text: observation })
    messages.push({ role: 'assistant', content: raw })
    messages.push({ role: 'user', content: renderPrompt(locale, 'library-observation.user', { boundary: await dataBoundary(observation), tool: name, observation }) })
  }
}

/**
 * Runs a tool: its SKILL.md body as the system prompt, the same instruction and answers as the Sub-Agent, and the
 * query. Returns the reply text (JSON re-serialized when it parses), or `{"error": …}` for an unknown tool or a
 * failed call; an error observation is data for the Sub-Agent, not a failure of the judgment.
 * @example await runTool(model, lib, 'coverage-check', 'coverage-check', item, 'Which covers more?', 'en')
 */
export async function runTool(model: ChatModel, library: Library, known: string | undefined, name: string, item: Pick<PairItem, 'instruction' | 'first' | 'second'>, query: string, locale: Locale, retry?: Partial<RetryPolicy>): Promise<string> {
  const entry = known ? library.entries[known] : undefined
  if (!entry || entry.kind !== 'tool') return JSON.stringify({ error: `no routed tool named ${name}` })
  const boundary = await dataBoundary(item.instruction, item.first, item.second, query)
  const request: ChatRequest = {
    role: 'judge',
    messages: [
      { role: 'system', content: entry.body },
      { role: 'user', content: renderPrompt(locale, 'library-tool.user', { boundary, instruction: item.instruction, first: item.first, second: item.second, query }) },
    ],
    task: { kind: 'library_tool', tool: entry.name, system: entry.body, instruction: item.instruction, first: item.first, second: item.second, query },
    json: true,
  }
  try {
    const reply = await askParsed(model, request, (text) => text, retry)
    try {
      return JSON.stringify(parseLenientJson(reply))
    } catch {
      return JSON.stringify({ raw: reply.slice(0, 2000) })
    }
  } catch (error) {
    return JSON.stringify({ error: describe(error) })
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
