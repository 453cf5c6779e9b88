/**
 * The search's first rubric for a prompt: an LLM writes 3–6 criteria from the prompt and up to 4 unlabelled
 * sample answers (texts only, in a seeded random order so dataset order cannot hint at quality); or a preset
 * rubric is looked up (autosr `--preset-rubrics`). The protocol — grade scale, N/A, votes — is the search's,
 * never the model's.
 */
import { z } from 'zod'
import { dataBoundary, parseReplyAs, runAgent } from '../../agents/run-agent.ts'
import type { ChatModel, ChatRequest } from '../../llm/types.ts'
import { renderPrompt, type Locale, type PromptOverrides } from '../../prompts/index.ts'
import { visibleCandidate, type PromptItem, type RubricInitializer } from '../types.ts'
import { CRITERION_TYPES, parseSearchRubric, SearchRubric, type Criterion } from '../../schemas/search-rubric.ts'
import { dataBlock, searchLabels, type SearchRoleOptions } from './common.ts'
import { seededRandom, shuffle } from '../../hash/index.ts'
import { criteriaFromReply, isRecord, RubricReply, rubricReplySchema, validateCriteria } from './rubric.ts'
import { jsonMockReply } from '../../llm/mock.ts'
import { answerSearchInitialize } from './mock.ts'
import { withReplySchema } from '../../llm/response-format.ts'

/** The key of the preset that applies to any prompt without its own (autosr §1.3). */
export const DEFAULT_PRESET_KEY = '__default__'
/** How many sample answers the initializer shows at most. */
const MAX_SAMPLES = 4
/** How many criteria a first rubric has. */
const INITIAL_CRITERIA = { min: 3, max: 6 } as const

export interface InitializerOptions extends SearchRoleOptions {
  /** The top of the integer grade scale of every rubric the search makes; default 10. */
  gradeMax?: number
  /** Whether graders may answer N/A; default true. */
  allowNa?: boolean
  /** Verifier votes per candidate; default 1. */
  numVotes?: number
}

interface RequestOptions {
  seed: number
  locale: Locale
  gradeMax: number
  prompts?: PromptOverrides
}

/**
 * The initializer's request: instructions and the grade scale (system), then the prompt and up to 4 sample answer
 * texts inside data markers, picked and ordered by a PRNG seeded from `seed`. No candidate id, source or label.
 * @example const request = await buildInitializerRequest(item, { seed: 7, locale: 'en', gradeMax: 10 })
 * @internal
 */
export async function buildInitializerRequest(item: PromptItem, options: RequestOptions): Promise<ChatRequest> {
  const { seed, locale, gradeMax } = options
  const samples = shuffle(item.candidates, seededRandom('search-initialize', seed, item.prompt_id))
    .slice(0, MAX_SAMPLES)
    .map((candidate) => visibleCandidate(candidate).text)
  const boundary = await dataBoundary(item.prompt, ...samples)
  const labels = searchLabels(locale)
  const user = renderPrompt(
    locale,
    'search-initializer.user',
    {
      boundary,
      prompt: item.prompt,
      sample_count: samples.length,
      samples: samples.map((text, index) => `${labels.sample(index + 1)}\n${dataBlock(boundary, text)}`).join('\n\n'),
    },
    options.prompts,
  )
  return {
    role: 'initializer',
    messages: [
      {
        role: 'system',
        content: renderPrompt(locale, 'search-initializer.system', { grade_max: gradeMax }, options.prompts),
      },
      { role: 'user', content: user },
    ],
    task: 'search_initialize',
    json: true,
    ...withReplySchema('rubric', rubricReplySchema(INITIAL_CRITERIA.min, INITIAL_CRITERIA.max)),
    seed,
    mock: jsonMockReply(answerSearchInitialize, { prompt: item.prompt, samples, grade_max: gradeMax, seed }),
  }
}

/**
 * Reads an initializer reply: lenient JSON and lenient criteria (see `criteriaFromReply`), then 3–6 criteria with
 * unique ids and positive weights, renormalised to sum 1. Anything else is an `invalid_reply`. A new rubric has no
 * parent whose ids its own must match, so an id written twice is told apart (`clear`, `clear_2`) rather than refused.
 * @example parseInitializerReply('{"rubric": {"criteria": ["Correct.", "Clear.", "Cites sources."]}}') // 3 criteria,
 *   weights 1/3
 * @internal
 */
export function parseInitializerReply(text: string): Criterion[] {
  const payload = parseReplyAs(RubricReply, text, 'initializer')
  const criteria = distinctIds(criteriaFromReply(payload, 'initializer'))
  return validateCriteria(criteria, { ...INITIAL_CRITERIA, agent: 'initializer' })
}

/** Criteria whose repeated ids get a suffix: the second `clear` becomes `clear_2`. */
function distinctIds(criteria: readonly Criterion[]): Criterion[] {
  const taken = new Set(criteria.map((criterion) => criterion.criterion_id))
  const seen = new Set<string>()
  return criteria.map((criterion) => {
    let id = criterion.criterion_id
    for (let n = 2; seen.has(id); n++)
      if (!taken.has(`${criterion.criterion_id}_${n}`)) id = `${criterion.criterion_id}_${n}`
    seen.add(id)
    taken.add(id)
    return id === criterion.criterion_id ? criterion : { ...criterion, criterion_id: id }
  })
}

/**
 * The LLM initializer: one call per prompt (retried on transport failures and invalid replies), id `<prompt_id>_r0`.
 * With `MockChatModel` the reply comes from autosr's heuristic (task_fit with the prompt's keywords, structure,
 * specificity, safety_style) through the same parsing path.
 * @example
 * const initializer = new LlmRubricInitializer(new MockChatModel(), { locale: 'en', gradeMax: 10 })
 * const rubric = await initializer.initialize(item, { seed: 7 }) // rubric_id 'p1_r0', 4 criteria
 */
export class LlmRubricInitializer implements RubricInitializer {
  readonly #options: Required<Pick<InitializerOptions, 'locale' | 'gradeMax' | 'allowNa' | 'numVotes'>> &
    InitializerOptions

  constructor(
    private readonly model: ChatModel,
    options: InitializerOptions = {},
  ) {
    this.#options = { locale: 'en', gradeMax: 10, allowNa: true, numVotes: 1, ...options }
  }

  /**
   * A first rubric for `item`; `seed` picks and orders the sample answers shown.
   * @example const rubric = await initializer.initialize(item, { seed: 7 }) // rubric.rubric_id ===
   *   `${item.prompt_id}_r0`
   */
  async initialize(item: PromptItem, options: { seed: number }): Promise<SearchRubric> {
    const { locale, gradeMax, allowNa, numVotes, prompts, retry } = this.#options
    const request = await buildInitializerRequest(item, {
      seed: options.seed,
      locale,
      gradeMax,
      ...(prompts ? { prompts } : {}),
    })
    const criteria = await runAgent(this.model, request, parseInitializerReply, retry)
    return parseSearchRubric({
      rubric_id: `${item.prompt_id}_r0`,
      criteria,
      grading_protocol: { grade_max: gradeMax, allow_na: allowNa, num_votes: numVotes },
      metadata: { origin: 'initializer', model: this.model.id },
    })
  }
}

// ---------------------------------------------------------------------------------------------
// Presets

/**
 * Preset rubrics by prompt id (`__default__` for any prompt), from any of the three autosr shapes: a previous
 * search output `{best_rubrics: [{prompt_id, rubric}]}`, `{rubrics: [{prompt_id, rubric}]}`, or `{<prompt_id>:
 * rubric}`. autosr rubrics carry no grade scale: they get `gradeMax`; unknown protocol fields (vote_method, …) and
 * unknown criterion types are dropped. A malformed rubric is an error that names its prompt id.
 * @example parsePresetRubrics({ best_rubrics: [{ prompt_id: 'p1', rubric: { rubric_id: 'r', criteria: [{ criterion_id:
 *   'c', text: 'Correct.' }] } }] }).get('p1')
 */
export function parsePresetRubrics(raw: unknown, options: { gradeMax?: number } = {}): Map<string, SearchRubric> {
  const gradeMax = options.gradeMax ?? 10
  if (!isRecord(raw)) throw new Error('preset rubrics: expected a JSON object')
  const entries: Array<[string, unknown]> = []
  const list = Array.isArray(raw.best_rubrics) ? raw.best_rubrics : Array.isArray(raw.rubrics) ? raw.rubrics : undefined
  if (list) {
    list.forEach((entry, index) => {
      if (!isRecord(entry) || typeof entry.prompt_id !== 'string' || !entry.prompt_id.trim())
        throw new Error(`preset rubrics: entry ${index} has no prompt_id`)
      entries.push([entry.prompt_id, entry.rubric])
    })
  } else {
    for (const [promptId, rubric] of Object.entries(raw))
      if (isRecord(rubric) && Array.isArray(rubric.criteria)) entries.push([promptId, rubric])
  }
  const presets = new Map<string, SearchRubric>()
  for (const [promptId, rubric] of entries) presets.set(promptId, presetRubric(promptId, rubric, gradeMax))
  return presets
}

function presetRubric(promptId: string, raw: unknown, gradeMax: number): SearchRubric {
  if (!isRecord(raw)) throw new Error(`preset rubric for "${promptId}": expected an object`)
  const protocol = isRecord(raw.grading_protocol) ? raw.grading_protocol : {}
  const criteria = Array.isArray(raw.criteria)
    ? raw.criteria.map((criterion) =>
        isRecord(criterion) && !(CRITERION_TYPES as readonly unknown[]).includes(criterion.criterion_type)
          ? { ...criterion, criterion_type: null }
          : criterion,
      )
    : raw.criteria
  const parsed = SearchRubric.safeParse({
    rubric_id: typeof raw.rubric_id === 'string' && raw.rubric_id.trim() ? raw.rubric_id : `${promptId}_preset`,
    criteria,
    grading_protocol: {
      grade_max: protocol.grade_max ?? gradeMax,
      allow_na: protocol.allow_na ?? true,
      num_votes: protocol.num_votes ?? 1,
    },
    metadata: isRecord(raw.metadata) ? raw.metadata : {},
  })
  if (!parsed.success) throw new Error(`preset rubric for "${promptId}": ${z.prettifyError(parsed.error)}`)
  const ids = parsed.data.criteria.map((criterion) => criterion.criterion_id)
  const repeated = ids.find((id, index) => ids.indexOf(id) !== index)
  if (repeated) throw new Error(`preset rubric for "${promptId}": criterion id "${repeated}" is used twice`)
  return parsed.data
}

/**
 * Starts from a preset rubric: the prompt's own, else `__default__` (renamed `<prompt_id>_r0`, its own id kept as
 * metadata `preset_rubric_id`), deep-copied with metadata origin `preset_initializer` and `preset_prompt_id`.
 * Without a preset: an error when `strict`, else `fallback`.
 * @example
 * const initializer = new PresetInitializer(parsePresetRubrics(json), new LlmRubricInitializer(model), { strict: false
 * }) await initializer.initialize(item, { seed: 7 })
 */
export class PresetInitializer implements RubricInitializer {
  readonly #presets: ReadonlyMap<string, SearchRubric>

  constructor(
    presets: ReadonlyMap<string, SearchRubric> | Readonly<Record<string, SearchRubric>>,
    private readonly fallback?: RubricInitializer,
    private readonly options: { strict?: boolean } = {},
  ) {
    this.#presets = presets instanceof Map ? presets : new Map(Object.entries(presets))
  }

  /**
   * The preset for `item` (own, else `__default__`), else the fallback's rubric.
   * @example const rubric = await presetInitializer.initialize(item, { seed: 7 }) // rubric.metadata.origin ===
   *   'preset_initializer'
   */
  async initialize(item: PromptItem, options: { seed: number }): Promise<SearchRubric> {
    const key = this.#presets.has(item.prompt_id)
      ? item.prompt_id
      : this.#presets.has(DEFAULT_PRESET_KEY)
        ? DEFAULT_PRESET_KEY
        : undefined
    if (key !== undefined) {
      const preset = structuredClone(this.#presets.get(key)!)
      const metadata = { ...preset.metadata, origin: 'preset_initializer', preset_prompt_id: key }
      // The shared default gets the prompt's own stable id, as the initializer would give it.
      if (key === DEFAULT_PRESET_KEY)
        return {
          ...preset,
          rubric_id: `${item.prompt_id}_r0`,
          metadata: { ...metadata, preset_rubric_id: preset.rubric_id },
        }
      return { ...preset, metadata }
    }
    if (this.options.strict)
      throw new Error(
        `no preset rubric for prompt "${item.prompt_id}" and no "${DEFAULT_PRESET_KEY}" preset (strict presets)`,
      )
    if (!this.fallback) throw new Error(`no preset rubric for prompt "${item.prompt_id}" and no fallback initializer`)
    return this.fallback.initialize(item, options)
  }
}
