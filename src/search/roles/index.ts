/**
 * The four roles of the offline rubric search (initializer, proposer, verifier, judge) as LLM agents — prompt in
 * en and zh, lenient parse plus validation, one retry loop per call — each answered on the mock backend by
 * `MockChatModel` through the very same request and parsing path. No LLM-visible payload carries a candidate's
 * id, source or labels: the roles show texts only.
 */
import { MockChatModel } from '../../llm/mock.ts'
import type { ChatModel } from '../../llm/types.ts'
import type { Locale } from '../../prompts/index.ts'
import type { PreferenceDataset, PromptItem, RubricInitializer, SearchRoles } from '../types.ts'
import type { SearchRubric } from '../../schemas/search-rubric.ts'
import type { SearchRoleOptions } from './common.ts'
import type { ContentExtraction, ContentExtractionInput } from '../../schemas/extraction.ts'
import { parseExtraction } from './extraction.ts'
import { LlmRubricInitializer, parsePresetRubrics, PresetInitializer } from './initializer.ts'
import { chooseJudge, LlmPairJudge, type JudgeChoice } from './judge.ts'
import { LlmRubricProposer } from './proposer.ts'
import type { SearchRoleName } from './rubric.ts'
import { LlmVerifier } from './verifier.ts'

export * from './common.ts'
export * from './extraction.ts'
export * from './initializer.ts'
export * from './judge.ts'
export * from './proposer.ts'
export * from './rubric.ts'
export * from './score.ts'
export * from './verifier.ts'

export interface CreateSearchRolesOptions extends Pick<SearchRoleOptions, 'retry' | 'prompts'> {
  /** The model of every role without its own; on the mock backend it defaults to `MockChatModel`. */
  model?: ChatModel
  /** Per-role models (autosr `--model-<role>`), falling back to `model`. */
  modelsByRole?: Partial<Record<SearchRoleName, ChatModel>>
  /** `mock` uses the heuristic judge where labels are incomplete; `llm` the LLM pair judge. */
  backend: 'mock' | 'llm'
  /** The dataset searched: decides the judge (see `chooseJudge`). */
  dataset: PreferenceDataset | readonly PromptItem[]
  locale?: Locale
  /** The top of the integer grade scale of initial rubrics (presets without a scale get it too); default 10. */
  gradeMax?: number
  /** N/A allowed in initial rubrics; default true. */
  allowNa?: boolean
  /** Verifier votes in initial rubrics; default 1. */
  numVotes?: number
  /** What the verifier grades of prompts and candidates; default the prompt as is and the candidate's answer part. */
  extraction?: ContentExtraction | ContentExtractionInput
  /** Start from preset rubrics: a parsed map, or any of the three autosr preset file shapes. */
  presets?: { rubrics: ReadonlyMap<string, SearchRubric> | unknown; strict?: boolean }
  /** Mock backend only: the share of verifier grades the heuristic flips; default 0. */
  mockNoise?: number
  /** How the verifier grades: `verdicts` asks each criterion as Yes or No (see RunConfig.judging). */
  judging?: 'grades' | 'verdicts'
}

/**
 * Builds the four roles for a search run. The judge is chosen by `chooseJudge`; which one, and why, is in
 * `judgeChoice`. A role without a model is an error on the llm backend.
 * @example
 * const roles = createSearchRoles({ backend: 'mock', dataset, locale: 'en', gradeMax: 10 })
 * const rubric = await roles.initializer.initialize(dataset.prompts[0]!, { seed: 7 })
 * roles.judgeChoice.kind // 'quality' for autosr's demo dataset
 */
export function createSearchRoles(options: CreateSearchRolesOptions): SearchRoles & { judgeChoice: JudgeChoice } {
  const { backend, locale = 'en', gradeMax = 10, retry, prompts } = options
  const fallbackModel = options.model ?? (backend === 'mock' ? new MockChatModel() : undefined)
  const modelFor = (role: SearchRoleName): ChatModel => {
    const model = options.modelsByRole?.[role] ?? fallbackModel
    if (!model) throw new Error(`createSearchRoles: no model for the ${role} (set model or modelsByRole.${role})`)
    return model
  }
  const common = { locale, ...(retry ? { retry } : {}), ...(prompts ? { prompts } : {}) }

  let initializer: RubricInitializer = new LlmRubricInitializer(modelFor('initializer'), {
    ...common,
    gradeMax,
    allowNa: options.allowNa ?? true,
    numVotes: options.numVotes ?? 1,
  })
  if (options.presets) {
    const raw = options.presets.rubrics
    const presets =
      raw instanceof Map ? (raw as ReadonlyMap<string, SearchRubric>) : parsePresetRubrics(raw, { gradeMax })
    initializer = new PresetInitializer(presets, initializer, { strict: options.presets.strict ?? false })
  }

  const judgeModel = options.modelsByRole?.judge ?? fallbackModel
  const judgeChoice = chooseJudge(options.dataset, {
    backend,
    ...(judgeModel ? { llmJudge: new LlmPairJudge(judgeModel, common) } : {}),
  })

  return {
    initializer,
    proposer: new LlmRubricProposer(modelFor('proposer'), common),
    verifier: new LlmVerifier(modelFor('verifier'), {
      ...common,
      extraction: parseExtraction(options.extraction ?? {}),
      ...(options.judging ? { judging: options.judging } : {}),
      ...(options.mockNoise === undefined ? {} : { mockNoise: options.mockNoise }),
    }),
    judge: judgeChoice.judge,
    judgeChoice,
  }
}
