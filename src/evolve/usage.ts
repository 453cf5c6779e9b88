/**
 * Per-role call and token accounting for the judge library's roles (RewardHarness §7.2: nothing counted calls or
 * tokens). `RoleMeter.wrap(model)` counts every request by the role its `task` names: router, sub_agent, tool,
 * chain_analyzer, evolver. Tokens are what the model reported; a reply from the offline cache (`cached: true`)
 * costs none and is counted as cached.
 */
import type { ChatModel, ChatRequest, ChatResponse } from '../llm/types.ts'

/** @internal */
export const LIBRARY_ROLES = ['router', 'sub_agent', 'tool', 'chain_analyzer', 'evolver'] as const
export type LibraryRole = (typeof LIBRARY_ROLES)[number]

/**
 * One role's counters. `calls` = ok + failures; `invalid_replies` are ok calls whose reply did not parse (then
 * retried).
 */
export interface RoleUsage {
  calls: number
  ok: number
  /** Calls that failed (transport, HTTP, timeout, empty reply). */
  failures: number
  invalid_replies: number
  /** Answered by the reply cache: no model call, no tokens. */
  cached: number
  prompt_tokens: number
  completion_tokens: number
}

export type LibraryUsage = Record<LibraryRole | 'total', RoleUsage>

const ROLE_OF: Partial<Record<ChatRequest['task'], LibraryRole>> = {
  library_route: 'router',
  library_judge: 'sub_agent',
  library_tool: 'tool',
  library_analyze: 'chain_analyzer',
  library_evolve: 'evolver',
}

const empty = (): RoleUsage => ({
  calls: 0,
  ok: 0,
  failures: 0,
  invalid_replies: 0,
  cached: 0,
  prompt_tokens: 0,
  completion_tokens: 0,
})

/** A model that parses through the reply cache (see judge.ts `askParsed`). */
interface ParsingModel extends ChatModel {
  completeParsed<T>(request: ChatRequest, parse: (reply: ChatResponse) => T | Promise<T>): Promise<T>
}

/**
 * Counts calls per library role.
 * @example const meter = new RoleMeter(); const model = meter.wrap(base); …; meter.usage().tool.calls
 */
export class RoleMeter {
  readonly #roles = new Map<LibraryRole, RoleUsage>(LIBRARY_ROLES.map((role) => [role, empty()]))

  /**
   * `model`, counted. Keeps `completeParsed` when the model has it, so unparseable replies are still evicted from
   * the cache, and counts them as invalid replies.
   * @example const counted = meter.wrap(new MockChatModel())
   */
  wrap(model: ChatModel): ChatModel {
    const inner = model as Partial<ParsingModel> & ChatModel
    const failed = (counters: RoleUsage | undefined) => {
      if (!counters) return
      counters.calls++
      counters.failures++
    }
    const parseCounted = async <T>(
      counters: RoleUsage | undefined,
      reply: ChatResponse,
      parse: (reply: ChatResponse) => T | Promise<T>,
    ): Promise<T> => {
      try {
        return await parse(reply)
      } catch (error) {
        if (counters) counters.invalid_replies++
        throw error
      }
    }
    const complete = async (request: ChatRequest): Promise<ChatResponse> => {
      const counters = this.#counters(request)
      try {
        const reply = await model.complete(request)
        this.#ok(counters, reply)
        return reply
      } catch (error) {
        failed(counters)
        throw error
      }
    }
    const wrapped: ParsingModel = {
      id: model.id,
      complete,
      completeParsed: async <T>(request: ChatRequest, parse: (reply: ChatResponse) => T | Promise<T>): Promise<T> => {
        const counters = this.#counters(request)
        if (typeof inner.completeParsed !== 'function') return parseCounted(counters, await complete(request), parse)
        let answered = false
        try {
          return await inner.completeParsed(request, (reply) => {
            answered = true
            this.#ok(counters, reply)
            return parseCounted(counters, reply, parse)
          })
        } catch (error) {
          if (!answered) failed(counters)
          throw error
        }
      },
    }
    return wrapped
  }

  /**
   * Counters per role plus their total (copies).
   * @example meter.usage().sub_agent.prompt_tokens
   */
  usage(): LibraryUsage {
    const out = Object.fromEntries(LIBRARY_ROLES.map((role) => [role, { ...this.#roles.get(role)! }])) as LibraryUsage
    out.total = sumUsage(LIBRARY_ROLES.map((role) => out[role]))
    return out
  }

  #counters(request: ChatRequest): RoleUsage | undefined {
    const role = ROLE_OF[request.task]
    return role ? this.#roles.get(role) : undefined
  }

  #ok(counters: RoleUsage | undefined, reply: ChatResponse): void {
    if (!counters) return
    counters.calls++
    counters.ok++
    if ((reply as ChatResponse & { cached?: boolean }).cached) counters.cached++
    counters.prompt_tokens += reply.usage.prompt_tokens
    counters.completion_tokens += reply.usage.completion_tokens
  }
}

/**
 * Field-wise sum of role counters.
 * @example sumUsage([a, b]).calls === a.calls + b.calls // true
 * @internal
 */
export function sumUsage(list: readonly RoleUsage[]): RoleUsage {
  const total = empty()
  for (const usage of list) for (const key of Object.keys(total) as (keyof RoleUsage)[]) total[key] += usage[key]
  return total
}

/**
 * `after − before`, per role: what one stretch of work (an iteration) cost.
 * @example usageSince(meter.usage(), snapshot).total.calls
 */
export function usageSince(after: LibraryUsage, before: LibraryUsage): LibraryUsage {
  const diff = (a: RoleUsage, b: RoleUsage) =>
    Object.fromEntries(
      (Object.keys(a) as (keyof RoleUsage)[]).map((key) => [key, a[key] - b[key]]),
    ) as unknown as RoleUsage
  return Object.fromEntries(
    [...LIBRARY_ROLES, 'total' as const].map((role) => [role, diff(after[role], before[role])]),
  ) as LibraryUsage
}
