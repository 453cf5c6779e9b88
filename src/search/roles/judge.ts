/**
 * Pairwise preference, the ground truth of the search objective. Four judges:
 * - `LlmPairJudge`: an LLM compares two answer TEXTS; it asks both orders, (A, B) and (B, A), and keeps a
 *   preference only when both agree — otherwise 0 (fixes autosr §8.3/§8.5 position bias). Verdicts are cached
 *   per unordered pair, since the judge does not depend on the rubric.
 * - `RankJudge` / `QualityJudge`: read the dataset's labels (rank: lower wins; quality: higher wins). They are
 *   not LLMs; they are the only judges that see labels.
 * - `HeuristicJudge` (mock backend): quality when both have it, else a length/structure proxy of the texts.
 *   It never looks at `source`.
 * `chooseJudge` picks one for a dataset.
 */
import { z } from 'zod'
import { dataBoundary, parseReplyAs, runAgent } from '../../agents/run-agent.ts'
import type { ChatModel, ChatRequest } from '../../llm/types.ts'
import { renderPrompt, type Locale, type PromptOverrides } from '../../prompts/index.ts'
import {
  visibleCandidate,
  type Candidate,
  type PreferenceDataset,
  type PreferenceJudge,
  type Preference,
  type PromptItem,
} from '../types.ts'
import type { SearchRoleOptions } from './common.ts'
import { isRecord } from './rubric.ts'
import { jsonMockReply } from '../../llm/mock.ts'
import { answerSearchJudge, textStructureScore } from './mock.ts'

type JudgeKind = 'llm' | 'rank' | 'quality' | 'heuristic'

/** Scores closer than this are a tie (autosr's heuristic judge). */
const TIE_EPSILON = 1e-9

export interface CompareInput {
  item: PromptItem
  left: Candidate
  right: Candidate
}

// ---------------------------------------------------------------------------------------------
// LLM judge

/**
 * The judge's request for one order of a pair: `first` is shown as answer A, `second` as answer B. Texts only.
 * @example const request = await buildJudgeRequest(item.prompt, left.text, right.text, { locale: 'en' })
 */
async function buildJudgeRequest(
  prompt: string,
  first: string,
  second: string,
  options: { locale: Locale; prompts?: PromptOverrides },
): Promise<ChatRequest> {
  // Each block is tagged with a hash of its own text, so a pair's prompt block is shared by every pair of that prompt.
  const [promptBoundary, firstBoundary, secondBoundary] = await Promise.all(
    [prompt, first, second].map((text) => dataBoundary(text)),
  )
  return {
    role: 'judge',
    messages: [
      { role: 'system', content: renderPrompt(options.locale, 'search-judge.system', {}, options.prompts) },
      {
        role: 'user',
        content: renderPrompt(
          options.locale,
          'search-judge.user',
          {
            prompt_boundary: promptBoundary!,
            prompt,
            first_boundary: firstBoundary!,
            first,
            second_boundary: secondBoundary!,
            second,
          },
          options.prompts,
        ),
      },
    ],
    task: 'search_judge',
    json: true,
    mock: jsonMockReply(answerSearchJudge, { prompt, first, second }),
  }
}

const WINNER_WORDS: Record<string, 'A' | 'B' | 'tie'> = {
  a: 'A',
  'answer a': 'A',
  'response a': 'A',
  first: 'A',
  left: 'A',
  '1': 'A',
  b: 'B',
  'answer b': 'B',
  'response b': 'B',
  second: 'B',
  right: 'B',
  '-1': 'B',
  tie: 'tie',
  equal: 'tie',
  draw: 'tie',
  same: 'tie',
  none: 'tie',
  neither: 'tie',
  '0': 'tie',
}

function readWinner(value: unknown): unknown {
  if (typeof value === 'number' && Number.isInteger(value)) return WINNER_WORDS[String(value)] ?? value
  if (typeof value === 'string')
    return (
      WINNER_WORDS[
        value
          .trim()
          .toLowerCase()
          .replace(/[.!"']/g, '')
      ] ?? value
    )
  return value
}

/**
 * A judge reply: `{"winner": "A" | "B" | "tie"}`. Lenient: `preference`/`better`/`choice` for `winner`; case and
 * wording ("Answer A", "first", "equal"); autosr's numbers 1 (A), -1 (B), 0 (tie). Booleans and anything else
 * are refused.
 */
const JudgeReply = z.preprocess(
  (value) => {
    if (!isRecord(value)) return value
    const winner = value.winner ?? value.preference ?? value.better ?? value.choice
    return { ...value, winner: readWinner(winner) }
  },
  z.object({ winner: z.enum(['A', 'B', 'tie']), reason: z.string().optional() }),
)

/**
 * Reads one judge reply: 1 when answer A is better, -1 when B is, 0 for a tie.
 * @example parseJudgeReply('```json\n{"winner": "b"}\n```') // -1
 * @internal
 */
export function parseJudgeReply(text: string): Preference {
  const { winner } = parseReplyAs(JudgeReply, text, 'judge')
  return winner === 'A' ? 1 : winner === 'B' ? -1 : 0
}

/** Position-consistency counts of an LLM judge: how often the two orders of a pair agreed. */
export interface JudgeStats {
  /** Pairs judged by the model (two requests each); cache hits and identical texts are not counted. */
  pairs: number
  /** Both orders gave the same verdict (including tie/tie). */
  consistent: number
  /** The orders disagreed: the pair is reported as a tie (0). */
  inconsistent: number
  /** Consistent and not a tie: the pairs that carry a preference. */
  decisive: number
  /** Single verdicts (two per pair) won by whatever stood in position A, and in position B: position bias. */
  firstPositionWins: number
  secondPositionWins: number
  /** Compares answered from the cache (either orientation). */
  cacheHits: number
}

/**
 * Reconciles the two orders of a pair: `forward` judged (left=A, right=B), `backward` judged (right=A, left=B).
 * Agreement keeps the verdict; disagreement is a tie.
 * @example reconcile(1, -1) // 1: left won in both positions
 * @internal
 */
export function reconcile(forward: Preference, backward: Preference): Preference {
  return forward === flip(backward) ? forward : 0
}

/** The same verdict seen from the other side (never -0). */
function flip(preference: Preference): Preference {
  return preference === 0 ? 0 : preference === 1 ? -1 : 1
}

/**
 * The LLM pair judge: both orders, concurrently, each one retried call; verdicts cached per (prompt, unordered
 * pair); identical texts are a tie without a call. With `MockChatModel` the verdict is a length/structure heuristic,
 * which is position-independent. It never sees ids, sources or labels.
 * @example
 * const judge = new LlmPairJudge(model, { locale: 'en' })
 * await judge.compare({ item, left, right }) // 1, -1 or 0
 * judge.stats() // { pairs: 1, consistent: 1, inconsistent: 0, … }
 */
export class LlmPairJudge implements PreferenceJudge {
  readonly kind = 'llm' as const
  readonly #cache = new Map<string, Promise<Preference>>()
  readonly #stats: JudgeStats = {
    pairs: 0,
    consistent: 0,
    inconsistent: 0,
    decisive: 0,
    firstPositionWins: 0,
    secondPositionWins: 0,
    cacheHits: 0,
  }

  constructor(
    private readonly model: ChatModel,
    private readonly options: SearchRoleOptions & { cache?: boolean } = {},
  ) {}

  /**
   * 1 when `left` is better, -1 when `right` is, 0 for a tie or when the two orders disagree.
   * @example await judge.compare({ item, left: candidates[0], right: candidates[1] }) // 1
   */
  async compare(input: CompareInput): Promise<Preference> {
    const { item, left, right } = input
    const leftText = visibleCandidate(left).text
    const rightText = visibleCandidate(right).text
    if (left.candidate_id === right.candidate_id || leftText === rightText) return 0
    if (this.options.cache === false) return this.#judge(item.prompt, leftText, rightText)
    // Cache in a canonical orientation (smaller id as left) and flip the verdict for the other one.
    const flipped = right.candidate_id < left.candidate_id
    const key = JSON.stringify([
      item.prompt_id,
      flipped ? right.candidate_id : left.candidate_id,
      flipped ? left.candidate_id : right.candidate_id,
    ])
    let verdict = this.#cache.get(key)
    if (verdict) this.#stats.cacheHits++
    else {
      verdict = flipped ? this.#judge(item.prompt, rightText, leftText) : this.#judge(item.prompt, leftText, rightText)
      this.#cache.set(key, verdict)
      verdict.catch(() => this.#cache.delete(key))
    }
    const preference = await verdict
    return flipped ? flip(preference) : preference
  }

  /**
   * Position-consistency counts so far.
   * @example judge.stats().inconsistent / judge.stats().pairs // the share of pairs lost to position bias
   */
  stats(): JudgeStats {
    return { ...this.#stats }
  }

  async #judge(prompt: string, left: string, right: string): Promise<Preference> {
    const { locale = 'en', prompts, retry } = this.options
    const build = (first: string, second: string) =>
      buildJudgeRequest(prompt, first, second, { locale, ...(prompts ? { prompts } : {}) })
    // Both requests are built before either is sent, so the model always sees A/B before B/A (not whichever digest
    // finished first).
    const [forwardRequest, backwardRequest] = await Promise.all([build(left, right), build(right, left)])
    const [forward, backward] = await Promise.all([
      runAgent(this.model, forwardRequest, parseJudgeReply, retry),
      runAgent(this.model, backwardRequest, parseJudgeReply, retry),
    ])
    const verdict = reconcile(forward, backward)
    const stats = this.#stats
    stats.pairs++
    for (const single of [forward, backward]) {
      if (single === 1) stats.firstPositionWins++
      if (single === -1) stats.secondPositionWins++
    }
    if (forward === flip(backward)) {
      stats.consistent++
      if (verdict !== 0) stats.decisive++
    } else stats.inconsistent++
    return verdict
  }
}

// ---------------------------------------------------------------------------------------------
// Label judges (not LLMs) and the heuristic judge

/**
 * Rank judge: the lower rank wins (1 = best), equal ranks tie; when either rank is missing, `fallback` decides
 * (0 without one). Reads labels, so it is never an LLM.
 * @example await new RankJudge(new HeuristicJudge()).compare({ item, left, right })
 * @internal
 */
export class RankJudge implements PreferenceJudge {
  readonly kind = 'rank' as const
  constructor(private readonly fallback?: PreferenceJudge) {}

  /**
   * 1 when `left` has the lower rank, -1 when `right` has, 0 for equal ranks.
   * @example await new RankJudge().compare({ item, left: ranked1, right: ranked2 }) // 1
   */
  async compare(input: CompareInput): Promise<Preference> {
    const a = input.left.label.rank
    const b = input.right.label.rank
    if (a === undefined || b === undefined) return this.fallback ? this.fallback.compare(input) : 0
    return a === b ? 0 : a < b ? 1 : -1
  }
}

/**
 * Quality judge: the higher quality wins, a difference under 1e-9 ties; when either quality is missing, `fallback`
 * decides (0 without one). Reads labels, so it is never an LLM.
 * @example await new QualityJudge().compare({ item, left, right })
 * @internal
 */
export class QualityJudge implements PreferenceJudge {
  readonly kind = 'quality' as const
  constructor(private readonly fallback?: PreferenceJudge) {}

  /**
   * 1 when `left` has the higher quality, -1 when `right` has, 0 within 1e-9.
   * @example await new QualityJudge().compare({ item, left: q09, right: q02 }) // 1
   */
  async compare(input: CompareInput): Promise<Preference> {
    const a = input.left.label.quality
    const b = input.right.label.quality
    if (a === undefined || b === undefined) return this.fallback ? this.fallback.compare(input) : 0
    return byScore(a, b)
  }
}

/**
 * The mock backend's judge (autosr's HeuristicPreferenceJudge without the source bonus): quality when both
 * candidates have one, else `textStructureScore` of the texts (length and structure). Never reads `source`.
 * @example await new HeuristicJudge().compare({ item, left, right })
 * @internal
 */
export class HeuristicJudge implements PreferenceJudge {
  readonly kind = 'heuristic' as const

  /**
   * Quality when both have it, else the length/structure proxy of the two texts.
   * @example await new HeuristicJudge().compare({ item, left: detailed, right: terse }) // 1
   */
  async compare(input: CompareInput): Promise<Preference> {
    const a = input.left.label.quality
    const b = input.right.label.quality
    if (a !== undefined && b !== undefined) return byScore(a, b)
    return byScore(textStructureScore(input.left.text), textStructureScore(input.right.text))
  }
}

function byScore(a: number, b: number): Preference {
  return Math.abs(a - b) < TIE_EPSILON ? 0 : a > b ? 1 : -1
}

export interface JudgeChoice {
  kind: JudgeKind
  judge: PreferenceJudge
  /** Why this judge, for logs and run manifests. */
  reason: string
}

/**
 * Picks the search's judge for a dataset:
 * 1. every candidate has a rank → `RankJudge`, on the LLM backend too: the ranking IS the ground truth the objective
 *    measures, so an LLM judge would only add cost and noise (autosr §3.6);
 * 2. else every candidate has a quality → `QualityJudge`;
 * 3. else the LLM pair judge (`llmJudge`, required on the llm backend), or `HeuristicJudge` on the mock backend.
 * The label judges fall back to (3) for a candidate without its label.
 * @example const { judge, kind } = chooseJudge(dataset, { backend: 'llm', llmJudge: new LlmPairJudge(model) })
 */
export function chooseJudge(
  dataset: PreferenceDataset | readonly PromptItem[],
  options: { backend: 'mock' | 'llm'; llmJudge?: PreferenceJudge },
): JudgeChoice {
  const items = Array.isArray(dataset) ? (dataset as readonly PromptItem[]) : (dataset as PreferenceDataset).prompts
  const candidates = items.flatMap((item) => item.candidates)
  const pairJudge = (): { kind: JudgeKind; judge: PreferenceJudge } => {
    if (options.backend === 'mock') return { kind: 'heuristic', judge: new HeuristicJudge() }
    if (!options.llmJudge)
      throw new Error(
        'chooseJudge: the llm backend needs an LLM judge for a dataset without complete rank or quality labels',
      )
    return { kind: 'llm', judge: options.llmJudge }
  }
  const fallback = () => (options.backend === 'mock' || options.llmJudge ? pairJudge().judge : undefined)
  if (candidates.length > 0 && candidates.every((candidate) => candidate.label.rank !== undefined)) {
    return {
      kind: 'rank',
      judge: new RankJudge(fallback()),
      reason: 'every candidate has a rank: the dataset ranking is the ground truth',
    }
  }
  if (candidates.length > 0 && candidates.every((candidate) => candidate.label.quality !== undefined)) {
    return {
      kind: 'quality',
      judge: new QualityJudge(fallback()),
      reason: 'every candidate has a quality score: the dataset scores are the ground truth',
    }
  }
  const chosen = pairJudge()
  return {
    ...chosen,
    reason:
      chosen.kind === 'llm'
        ? 'labels are incomplete: an LLM judges each pair in both orders'
        : 'labels are incomplete: the mock backend judges by quality where known, else length and structure',
  }
}
