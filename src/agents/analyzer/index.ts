import type { RetryPolicy } from '../../llm/retry.ts'
import type { ChatModel, ChatRequest } from '../../llm/types.ts'
import { renderPrompt, type Locale, type PromptOverrides } from '../../prompts/index.ts'
import { Analysis, trainingStage } from '../../schemas/agents.ts'
import type { Rollout, TrainingMetadata } from '../../schemas/rollout.ts'
import type { Rubric } from '../../schemas/rubric.ts'
import type { CriterionGrade } from '../../schemas/score.ts'
import { dataBoundary, formatScore, orNone, parseReplyAs, rubricLines, runAgent, stageLabel } from '../run-agent.ts'
import { analysisReplySchema } from '../reply-schemas.ts'
import { withReplySchema } from '../../llm/response-format.ts'
import { groupBlockTags } from '../scorer/index.ts'
import { mockAnalyzerReply } from './mock.ts'

export interface AnalyzerInput {
  /** The run's prompt overrides, keyed `<locale>/<name>` (see RunConfig.prompts). */
  prompts?: PromptOverrides
  rollout: Rollout
  metadata: TrainingMetadata
  /** The rubric snapshot the rollout was scored against: anchors and adaptive rubrics. */
  rubrics: Rubric[]
  /** The reward in [0, 1]. */
  score: number
  criteria: CriterionGrade[]
  gradeMax: number
  locale: Locale
}

/**
 * The Analyzer's request for one scored rollout, laid out for prefix caching like the scorer's: instructions (system),
 * the rubric snapshot, the training context, the prompt and reference a group shares, then the verdict, the judge's
 * reasons and the answer. Each data block is tagged with a hash of its own text.
 * @example const request = await buildAnalyzerRequest({ rollout, metadata, rubrics, score: 0.8, criteria, gradeMax: 10,
 *   locale: 'en' })
 * @internal
 */
export async function buildAnalyzerRequest(input: AnalyzerInput): Promise<ChatRequest> {
  const { rollout, metadata, rubrics, score, criteria, gradeMax, locale } = input
  const reasons = criteria.map((grade) => `${grade.rubric_id}: ${grade.reason ?? ''}`).join('\n')
  const reference = rollout.supplemental_context ?? ''
  const user = renderPrompt(
    locale,
    'analyzer.user',
    {
      rubrics: rubricLines(rubrics, locale),
      goal: metadata.high_level_goal,
      model_size: metadata.model_size,
      current_step: metadata.current_step,
      total_steps: metadata.total_steps,
      stage: stageLabel(locale, trainingStage(metadata.current_step, metadata.total_steps)),
      score: formatScore(score),
      grade_max: gradeMax,
      grades: orNone(locale, criteria.map((grade) => `- ${grade.rubric_id}: ${grade.grade}/${gradeMax}`).join('\n')),
      ...(await groupBlockTags(rollout.input, reference)),
      input: rollout.input,
      reference,
      reasons_boundary: await dataBoundary(orNone(locale, reasons)),
      reasons: orNone(locale, reasons),
      boundary: await dataBoundary(rollout.output),
      output: rollout.output,
    },
    input.prompts,
  )
  return {
    role: 'analyzer',
    messages: [
      { role: 'system', content: renderPrompt(locale, 'analyzer.system', {}, input.prompts) },
      { role: 'user', content: user },
    ],
    task: 'analyze',
    mock: mockAnalyzerReply({ rollout, metadata, rubrics, score, criteria, gradeMax }),
    json: true,
    ...withReplySchema('analysis', analysisReplySchema()),
  }
}

/**
 * Reads an Analyzer reply: repaired JSON validated as `Analysis` (an unflagged verdict gets severity
 * `none`); anything else is an `invalid_reply`.
 * @example parseAnalyzerReply('```json\n{"overall_assessment": "ok", …}\n```')
 * @internal
 */
export function parseAnalyzerReply(text: string): Analysis {
  return parseReplyAs(Analysis, text, 'analyzer')
}

/**
 * Analyses one scored rollout: one call, retried on transport failures and invalid replies.
 * @example const analysis = await runAnalyzer(model, input, { maxAttempts: 4 })
 */
export async function runAnalyzer(
  model: ChatModel,
  input: AnalyzerInput,
  retry: Partial<RetryPolicy> = {},
): Promise<Analysis> {
  return runAgent(model, await buildAnalyzerRequest(input), parseAnalyzerReply, retry)
}
