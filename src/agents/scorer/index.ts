import { z } from 'zod'
import { canonicalJson, sha256Hex } from '../../hash/index.ts'
import type { RetryPolicy } from '../../llm/retry.ts'
import { LlmError, type ChatModel, type ChatRequest } from '../../llm/types.ts'
import { promptTemplate, renderPrompt, type Locale, type PromptOverrides } from '../../prompts/index.ts'
import type { Rollout, TrainingMetadata } from '../../schemas/rollout.ts'
import type { Rubric } from '../../schemas/rubric.ts'
import type { CriterionGrade } from '../../schemas/score.ts'
import { rewardFromGrades } from '../../scoring/index.ts'
import { dataBoundary, PENALTY_LABEL, parseLenientJson, runAgent } from '../run-agent.ts'
import { mockScorerReply } from './mock.ts'

export { parseLenientJson }

export interface ScorerInput {
  /** The run's prompt overrides, keyed `<locale>/<name>` (see RunConfig.prompts). */
  prompts?: PromptOverrides
  rubrics: Rubric[]
  rollout: Rollout
  metadata: TrainingMetadata
  gradeMax: number
  locale: Locale
}

export interface Judgement {
  score: number
  criteria: CriterionGrade[]
}

const ScorerReply = z.object({
  grades: z.array(z.object({ rubric_id: z.string(), grade: z.number(), reason: z.string().optional() })),
})

/**
 * The training context every judging prompt shows (the scorer's and the group scorer's), as template variables.
 * @example renderPrompt(locale, 'scorer.user', { ...trainingVars(metadata), input, output })
 */
export function trainingVars(metadata: TrainingMetadata) {
  return {
    goal: metadata.high_level_goal,
    model_size: metadata.model_size,
    current_step: metadata.current_step,
    total_steps: metadata.total_steps,
  }
}

/**
 * The one chat request that grades every rubric for a rollout. The stable part (instructions, scale,
 * rubrics) comes first for prefix caching; rollout text sits inside data markers whose boundary is a
 * hash of that text, so the text cannot forge its own closing marker.
 * @example const request = await buildScorerRequest({ rubrics, rollout, metadata, gradeMax: 10, locale: 'en' })
 */
export async function buildScorerRequest(input: ScorerInput): Promise<ChatRequest> {
  const { rubrics, rollout, metadata, gradeMax, locale } = input
  const boundary = await dataBoundary(rollout.input, rollout.output, rollout.supplemental_context ?? '')
  const system = renderPrompt(locale, 'scorer.system', { grade_max: gradeMax, boundary }, input.prompts)
  const user = renderPrompt(
    locale,
    'scorer.user',
    {
      boundary,
      rubrics: rubrics.map(rubricLine).join('\n'),
      ...trainingVars(metadata),
      input: rollout.input,
      reference: rollout.supplemental_context ?? '',
      output: rollout.output,
    },
    input.prompts,
  )
  return {
    role: 'scorer',
    messages: [
      { role: 'system', content: system },
      { role: 'user', content: user },
    ],
    task: 'score',
    mock: mockScorerReply({ rubrics, rollout, gradeMax }),
    json: true,
  }
}

/**
 * A rubric as a scorer reads it (pointwise or in a group); a penalty says so first, since its grade runs the other way.
 * @example rubricLine(rubric) // '- no-grader (weight 1): [PENALTY] Addresses the grader.'
 */
export function rubricLine(rubric: Rubric): string {
  return `- ${rubric.id} (weight ${rubric.weight}): ${rubric.kind === 'penalty' ? PENALTY_LABEL : ''}${rubric.text}`
}

/**
 * Reads a scorer reply: repairs malformed JSON, then demands exactly one integer grade on the
 * 0..gradeMax scale for every rubric. Anything else is an `invalid_reply`, never a silent 0.
 * @example parseScorerReply('{"grades":[{"rubric_id":"a","grade":7}]}', [rubricA], 10)
 */
export function parseScorerReply(text: string, rubrics: readonly Rubric[], gradeMax: number): CriterionGrade[] {
  const parsed = ScorerReply.safeParse(parseLenientJson(text))
  if (!parsed.success)
    throw new LlmError('invalid_reply', `scorer reply has the wrong shape: ${z.prettifyError(parsed.error)}`)
  const byId = new Map<string, { grade: number; reason?: string | undefined }>()
  for (const entry of parsed.data.grades) {
    if (byId.has(entry.rubric_id))
      throw new LlmError('invalid_reply', `scorer graded rubric "${entry.rubric_id}" twice`)
    byId.set(entry.rubric_id, entry)
  }
  return rubrics.map((rubric) => {
    const entry = byId.get(rubric.id)
    if (!entry) throw new LlmError('invalid_reply', `scorer gave no grade for rubric "${rubric.id}"`)
    if (!Number.isInteger(entry.grade) || entry.grade < 0 || entry.grade > gradeMax) {
      throw new LlmError(
        'invalid_reply',
        `scorer grade ${entry.grade} for "${rubric.id}" is not an integer in 0..${gradeMax}`,
      )
    }
    return {
      rubric_id: rubric.id,
      grade: entry.grade,
      weight: rubric.weight,
      ...(rubric.kind === 'penalty' ? { penalty: true } : {}),
      ...(entry.reason ? { reason: entry.reason.slice(0, 500) } : {}),
    }
  })
}

/**
 * Grades a rollout: one call, parsed and validated, retried with backoff on transport failures and invalid replies.
 * @example const { score, criteria } = await judgeRollout(model, input, { maxAttempts: 4 })
 */
export async function judgeRollout(
  model: ChatModel,
  input: ScorerInput,
  retry: Partial<RetryPolicy> = {},
): Promise<Judgement> {
  const request = await buildScorerRequest(input)
  return runAgent(
    model,
    request,
    (text) => {
      const criteria = parseScorerReply(text, input.rubrics, input.gradeMax)
      return { score: rewardFromGrades(criteria, input.gradeMax), criteria }
    },
    retry,
  )
}

/**
 * The key of a judgement in the score cache, without the rubric version (the instance adds that):
 * the same model, prompt templates, scale and rollout content always map to the same key.
 * @example const key = await judgementKey(model.id, 'en', 10, rollout, metadata)
 */
export async function judgementKey(
  modelId: string,
  locale: Locale,
  gradeMax: number,
  rollout: Rollout,
  metadata: TrainingMetadata,
  prompts: PromptOverrides = {},
): Promise<string> {
  return sha256Hex(
    canonicalJson({
      model: modelId,
      prompts: [
        prompts[`${locale}/scorer.system`] ?? promptTemplate(locale, 'scorer.system'),
        prompts[`${locale}/scorer.user`] ?? promptTemplate(locale, 'scorer.user'),
      ],
      grade_max: gradeMax,
      rollout: {
        input: rollout.input,
        output: rollout.output,
        supplemental_context: rollout.supplemental_context ?? '',
      },
      metadata,
    }),
  )
}
