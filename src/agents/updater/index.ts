import type { RetryPolicy } from '../../llm/retry.ts'
import type { ChatModel, ChatRequest } from '../../llm/types.ts'
import { renderPrompt, type Locale, type PromptOverrides } from '../../prompts/index.ts'
import { RubricUpdate, type BatchSummary, type TrainingStage } from '../../schemas/agents.ts'
import type { Rubric } from '../../schemas/rubric.ts'
import type { CriterionStepHealth } from '../../scoring/health.ts'
import { dataBoundary, orNone, parseReplyAs, rubricLines, runAgent, stageLabel } from '../run-agent.ts'
import { statsValues, summaryForPrompt } from '../summarizer/index.ts'
import { rubricUpdateReplySchema } from '../reply-schemas.ts'
import { withReplySchema } from '../../llm/response-format.ts'
import { MAX_ADAPTIVE_RUBRICS } from './apply.ts'
import { mockUpdaterReply } from './mock.ts'

export { applyRubricUpdate } from './apply.ts'
export type { RubricDiff } from './apply.ts'

export interface UpdaterInput {
  /** The run's prompt overrides, keyed `<locale>/<name>` (see RunConfig.prompts). */
  prompts?: PromptOverrides
  /** The instance's rubrics in force: anchors and the current adaptive set. */
  rubrics: Rubric[]
  summary: BatchSummary
  /** The retrieved memories, already formatted as one text block (empty when there are none). */
  memories: string
  step: number
  stage: TrainingStage
  /** The run's high-level goal, when known. */
  goal?: string
  locale: Locale
  /** Each criterion's health over this step's rollouts (see `criterionHealth`). */
  health?: readonly CriterionStepHealth[]
}

/**
 * The Updater's request: instructions, anchors, the current adaptive rubrics and the step's numbers
 * first; the step summary and the memories block (model-written text) inside data markers.
 * @example const request = await buildUpdaterRequest({ rubrics, summary, memories, step: 4, stage: 'early', locale:
 *   'en' })
 * @internal
 */
export async function buildUpdaterRequest(input: UpdaterInput): Promise<ChatRequest> {
  const { rubrics, summary, memories, step, stage, goal = '', locale } = input
  const written = summaryForPrompt(summary)
  const boundary = await dataBoundary(written, memories)
  const user = renderPrompt(
    locale,
    'updater.user',
    {
      anchors: rubricLines(
        rubrics.filter((rubric) => rubric.is_anchor),
        locale,
      ),
      adaptive: rubricLines(
        rubrics.filter((rubric) => !rubric.is_anchor),
        locale,
      ),
      health: healthLines(
        rubrics.filter((rubric) => !rubric.is_anchor),
        input.health ?? [],
        locale,
      ),
      goal,
      step,
      stage: stageLabel(locale, stage),
      ...statsValues(summary.stats),
      boundary,
      summary: written,
      memories: orNone(locale, memories),
    },
    input.prompts,
  )
  return {
    role: 'updater',
    messages: [
      { role: 'system', content: renderPrompt(locale, 'updater.system', {}, input.prompts) },
      { role: 'user', content: user },
    ],
    task: 'update_rubrics',
    mock: mockUpdaterReply({ rubrics, summary, memories, stage }),
    json: true,
    ...withReplySchema(
      'rubric_update',
      rubricUpdateReplySchema(
        rubrics.filter((rubric) => !rubric.is_anchor).map((rubric) => rubric.weight),
        MAX_ADAPTIVE_RUBRICS,
      ),
    ),
  }
}

/** One line per adaptive rubric: how it separated this step's responses, or that it has no measurement yet. */
function healthLines(adaptive: readonly Rubric[], health: readonly CriterionStepHealth[], locale: Locale): string {
  if (adaptive.length === 0) return orNone(locale, '')
  const number = (value: number | null, digits = 3) => (value === null ? 'n/a' : value.toFixed(digits))
  const percent = (share: number) => `${Math.round(share * 100)}%`
  return adaptive
    .map((rubric) => {
      const entry = health.find((item) => item.rubric_id === rubric.id)
      if (!entry) return `- ${rubric.id}: ${orNone(locale, '')}`
      return (
        `- ${rubric.id}: spread ${number(entry.within_group_std)}, mean ${number(entry.mean, 2)}, ` +
        `top ${percent(entry.share_max)}, bottom ${percent(entry.share_min)}, ` +
        `corr ${number(entry.corr_with_score, 2)} (n=${entry.n})`
      )
    })
    .join('\n')
}

/**
 * Reads an Updater reply as a `RubricUpdate` (strategy and ops case-insensitive, nulls as absent).
 * Whether its items may be applied is `applyRubricUpdate`'s decision, item by item.
 * @example parseUpdaterReply('{"strategy": "corrective", "consulted_memories": [], "rationale": "…", "modifications":
 *   [], "final_adaptive": []}')
 * @internal
 */
export function parseUpdaterReply(text: string): RubricUpdate {
  return parseReplyAs(RubricUpdate, text, 'updater')
}

/**
 * Proposes the next adaptive rubric set: one call, retried on transport failures and invalid replies.
 * Apply the result with `applyRubricUpdate`, which keeps anchors and refuses what touches them.
 * @example const update = await runUpdater(model, input); const next = applyRubricUpdate(rubrics, update, { version: 2,
 *   createdAt })
 */
export async function runUpdater(
  model: ChatModel,
  input: UpdaterInput,
  retry: Partial<RetryPolicy> = {},
): Promise<RubricUpdate> {
  return runAgent(model, await buildUpdaterRequest(input), parseUpdaterReply, retry)
}
