import type { AnalysisRecord, BatchSummary, TrainingStage } from '../schemas/agents.ts'
import type { AgentRole } from '../schemas/run-config.ts'
import type { Rollout, TrainingMetadata } from '../schemas/rollout.ts'
import type { Rubric } from '../schemas/rubric.ts'
import type { CriterionGrade } from '../schemas/score.ts'
import type { Criterion, MutationMode } from '../search/types.ts'

/** One part of a multi-part (vision) message, in the OpenAI chat format. `url` is a `data:` URL or an http(s) URL. */
export type ChatContentPart = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } }

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant'
  /** The message's text. For a multi-part message, the text of its parts (what text-only readers and caches see). */
  content: string
  /**
   * Text and image parts (OpenAI-compatible vision messages). When set, adapters that speak the OpenAI format send
   * these instead of `content`; text-only adapters (the mock) read `content`. Build both with `visionMessage`.
   */
  parts?: ChatContentPart[]
}

/**
 * A multi-part message: `parts` as given, `content` their text parts joined by blank lines. Give each image a text
 * part that names it (handle and digest) so the text alone tells two messages with different images apart.
 * @example visionMessage('user', [{ type: 'text', text: 'Image A-1:' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBO…' } }])
 * // { role: 'user', content: 'Image A-1:', parts: [...] }
 */
export function visionMessage(role: ChatMessage['role'], parts: ChatContentPart[]): ChatMessage {
  const content = parts.flatMap((part) => (part.type === 'text' ? [part.text] : [])).join('\n\n')
  return parts.some((part) => part.type === 'image_url') ? { role, content, parts } : { role, content }
}

/**
 * What an agent knows about its task in structured form. Real models read `messages`;
 * the mock backend reads this, so its heuristics never have to parse prompt text.
 */
export type AgentTask =
  | { kind: 'score'; rubrics: Rubric[]; rollout: Rollout; grade_max: number }
  /** Analyzer: one graded rollout, with the rubric snapshot it was graded against. */
  | {
      kind: 'analyze'
      rollout: Rollout
      metadata: TrainingMetadata
      rubrics: Rubric[]
      score: number
      criteria: CriterionGrade[]
      grade_max: number
    }
  /** Summarizer: the analyses of one step (or one chunk of it). */
  | { kind: 'summarize'; step: number; rubrics: Rubric[]; analyses: AnalysisRecord[] }
  /** MetaSummarizer: the chunk summaries of one step, to consolidate. */
  | { kind: 'meta_summarize'; step: number; rubrics: Rubric[]; summaries: BatchSummary[] }
  /** QueryGenerator: memory queries for a step summary, at most `max_queries`. */
  | { kind: 'generate_queries'; summary: BatchSummary; rubrics: Rubric[]; max_queries: number }
  /** Updater: the next adaptive rubric set. `memories` is the already formatted memory block. */
  | {
      kind: 'update_rubrics'
      rubrics: Rubric[]
      summary: BatchSummary
      memories: string
      step: number
      stage: TrainingStage
    }
  // Offline rubric search (src/search/roles). Candidates appear as texts only: never ids, sources or labels.
  /** Search initializer: a first rubric for one prompt, from up to 4 unlabelled sample answers. */
  | { kind: 'search_initialize'; prompt: string; samples: string[]; grade_max: number; seed: number }
  /** Search proposer: `criteria` mutated in `mode`; `top` is the answer the current rubric ranks higher (not ground truth). */
  | {
      kind: 'search_propose'
      prompt: string
      criteria: Criterion[]
      mode: MutationMode
      top: string
      runner_up: string
      seed: number
    }
  /** Search verifier: integer grades 0..grade_max (null = N/A when allowed) of one extracted answer; `noise` is read by the mock only. */
  | {
      kind: 'search_verify'
      prompt: string
      answer: string
      criteria: Criterion[]
      grade_max: number
      allow_na: boolean
      vote: number
      seed: number
      noise: number
    }
  /** Search judge: which of two answers is better, in the order shown (`first` is "A"). */
  | { kind: 'search_judge'; prompt: string; first: string; second: string }
  // Judge library and its evolution (src/evolve). Candidates appear as texts only: never ids, sources or labels.
  /** Library router: entries to use for an instruction (never the answers). */
  | { kind: 'library_route'; instruction: string; entries: LibraryEntrySummary[] }
  /** Library sub-agent, one turn: the routed skills (bodies) and tools, and the observations of earlier tool calls. */
  | {
      kind: 'library_judge'
      instruction: string
      first: string
      second: string
      skills: { name: string; body: string }[]
      tools: { name: string; when_to_use: string }[]
      observations: { tool: string; text: string }[]
      max_tool_calls: number
    }
  /** A library tool run as a sub-call: its system prompt plus the same inputs the sub-agent saw, and the sub-agent's query. */
  | {
      kind: 'library_tool'
      tool: string
      system: string
      instruction: string
      first: string
      second: string
      query: string
    }
  /** Chain analyzer: judged training pairs with their chains (tool observations included) against the labels. */
  | { kind: 'library_analyze'; entries: LibraryEntrySummary[]; results: LibraryChainResult[] }
  /** Evolver: one add / modify / delete from the analyzer's signals; `rejected` are changes already rolled back. */
  | { kind: 'library_evolve'; entries: LibraryEntrySummary[]; signals: unknown[]; rejected: string[] }

/** An entry of the judge library as routers, analyzers and evolvers see it. */
export interface LibraryEntrySummary {
  name: string
  kind: 'skill' | 'tool'
  description: string
}

/**
 * One judged training pair as the chain analyzer reads it. `label`: 'A' | 'B' | 'tie'; `prediction`: the same, or
 * 'inconsistent' when the two presentation orders disagreed; null on a failure.
 */
export interface LibraryChainResult {
  id: string
  instruction: string
  label: string
  prediction: string | null
  correct: boolean
  chain: string
}

/** The offline rubric search's roles (src/search/roles): requests carry their own role, not an online agent's. */
export type SearchRequestRole = 'initializer' | 'proposer' | 'verifier' | 'judge'

export interface ChatRequest {
  /** Who asks: an online agent, or a search role. Accounting, caches and call logs key on it. */
  role: AgentRole | SearchRequestRole
  messages: ChatMessage[]
  task: AgentTask
  /** Ask the server for a JSON object reply when it supports it. */
  json: boolean
  /** Sampling seed: the same request with another seed is another draw (a repeat), and caches key on it. */
  seed?: number
  signal?: AbortSignal
}

export interface ChatUsage {
  prompt_tokens: number
  completion_tokens: number
}

export interface ChatResponse {
  text: string
  model: string
  usage: ChatUsage
}

/** The LLM port. Adapters: mock (heuristic), openai (any OpenAI-compatible server), workers-ai. */
export interface ChatModel {
  /** A stable name of backend + model, part of every cache key. */
  readonly id: string
  complete(request: ChatRequest): Promise<ChatResponse>
}

export type LlmFailure = 'rate_limited' | 'server_error' | 'timeout' | 'network' | 'bad_request' | 'invalid_reply'

/**
 * A failed LLM call, classified so retry policy never has to read message strings.
 * @example throw new LlmError('rate_limited', 'HTTP 429', 2)
 */
export class LlmError extends Error {
  constructor(
    readonly kind: LlmFailure,
    message: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(message)
    this.name = 'LlmError'
  }

  get retryable(): boolean {
    return this.kind !== 'bad_request'
  }
}
