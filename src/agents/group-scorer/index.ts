/**
 * Relative (listwise) judging: one call grades every response of a GRPO group to the same prompt, side by side, so
 * the judge spends its effort on what GRPO uses, the differences within the group. Responses are shown in a seeded
 * random order under opaque labels (A1, A2, …), so neither position nor label carries information.
 */
import { z } from 'zod'
import { shuffle, seededRandom } from '../../hash/index.ts'
import type { RetryPolicy } from '../../llm/retry.ts'
import { LlmError, type ChatModel, type ChatRequest } from '../../llm/types.ts'
import { renderPrompt, type Locale, type PromptOverrides } from '../../prompts/index.ts'
import type { Rollout, TrainingMetadata } from '../../schemas/rollout.ts'
import type { Rubric } from '../../schemas/rubric.ts'
import type { CriterionGrade } from '../../schemas/score.ts'
import { rewardFromGrades } from '../../scoring/index.ts'
import { dataBoundary, parseLenientJson, runAgent } from '../run-agent.ts'
import { mockScorerAnswer } from '../scorer/mock.ts'
import { gradeSchema, keyedBy } from '../../llm/response-format.ts'
import { gradesReplyTokens, groupBlockTags, rubricLine, trainingVars, type Judgement } from '../scorer/index.ts'

export interface GroupScorerInput {
  prompts?: PromptOverrides
  rubrics: Rubric[]
  /** Distinct responses to one prompt: the same `input` and reference, different outputs. */
  rollouts: Rollout[]
  metadata: TrainingMetadata
  gradeMax: number
  locale: Locale
  /** Seeds the order the judge sees; recorded by the caller so the order can be reproduced. */
  seed: number
}

const ListedGroupReply = z.object({
  answers: z.array(
    z.object({
      label: z.string(),
      grades: z.array(z.object({ rubric_id: z.string(), grade: z.number() })),
    }),
  ),
})
/**
 * `{"<label>": {"<rubric id>": grade}}` (what the prompt asks for: the fewest tokens), or the older
 * `{"answers": [{label, grades: [{rubric_id, grade}]}]}`, read into the older shape.
 */
const GroupReply = z.union([
  ListedGroupReply,
  z.record(z.string(), z.record(z.string(), z.number())).transform((byLabel) => ({
    answers: Object.entries(byLabel).map(([label, grades]) => ({
      label,
      grades: Object.entries(grades).map(([rubric_id, grade]) => ({ rubric_id, grade })),
    })),
  })),
])

/**
 * The group's chat request and, per response (in input order), the label the judge sees it under.
 * @example const { request, labels } = await buildGroupScorerRequest(input); labels[0] // 'A3'
 * @internal
 */
export async function buildGroupScorerRequest(
  input: GroupScorerInput,
): Promise<{ request: ChatRequest; labels: string[] }> {
  const { rubrics, rollouts, metadata, gradeMax, locale } = input
  const first = rollouts[0]!
  const order = shuffle(
    rollouts.map((_, index) => index),
    seededRandom('group-order', input.seed),
  )
  const labels = new Array<string>(rollouts.length)
  for (const [position, index] of order.entries()) labels[index] = `A${position + 1}`
  // Each answer's block is tagged with a hash of that answer alone: no answer can forge its own closing marker, and
  // the group's shared blocks before the answers do not depend on them.
  const blocks = await Promise.all(
    order.map(async (index) => {
      const output = rollouts[index]!.output
      const tag = await dataBoundary(output)
      return `Answer ${labels[index]}:\n<<<DATA-${tag}\n${output}\nDATA-${tag}>>>`
    }),
  )
  const reference = first.supplemental_context ?? ''
  const user = renderPrompt(
    locale,
    'group-scorer.user',
    {
      rubrics: rubrics.map(rubricLine).join('\n'),
      ...trainingVars(metadata),
      ...(await groupBlockTags(first.input, reference)),
      input: first.input,
      reference,
      count: rollouts.length,
      answers: blocks.join('\n\n'),
    },
    input.prompts,
  )
  const request: ChatRequest = {
    role: 'scorer',
    messages: [
      {
        role: 'system',
        content: renderPrompt(locale, 'group-scorer.system', { grade_max: gradeMax }, input.prompts),
      },
      { role: 'user', content: user },
    ],
    task: 'score_group',
    // The mock grades each response as its pointwise mock would: relative and pointwise agree offline.
    mock: (sampling) =>
      JSON.stringify({
        answers: order.map((index) => ({
          label: labels[index],
          grades: mockScorerAnswer({ rubrics, rollout: rollouts[index]!, gradeMax }, sampling).grades,
        })),
      }),
    json: true,
    maxTokens: gradesReplyTokens(rubrics.length, 'none', rollouts.length),
    // Every label once, and in each every rubric id once with an integer grade on the scale.
    jsonSchema: {
      name: 'group_grades',
      schema: keyedBy(
        labels,
        keyedBy(
          rubrics.map((rubric) => rubric.id),
          gradeSchema(gradeMax),
        ),
      ),
    },
  }
  return { request, labels }
}

/**
 * Reads a group reply: exactly one entry per label and, in each, one integer grade on 0..gradeMax per rubric; anything
 * else is an `invalid_reply` (the caller falls back to pointwise judging, never to zeros). Grades per response, in
 * input order.
 * @example parseGroupScorerReply('{"answers":[{"label":"A1","grades":[{"rubric_id":"a","grade":7}]}]}', ['A1'], [a],
 *   10)
 * @internal
 */
export function parseGroupScorerReply(
  text: string,
  labels: readonly string[],
  rubrics: readonly Rubric[],
  gradeMax: number,
): CriterionGrade[][] {
  const parsed = GroupReply.safeParse(parseLenientJson(text))
  if (!parsed.success)
    throw new LlmError('invalid_reply', `group scorer reply has the wrong shape: ${z.prettifyError(parsed.error)}`)
  const byLabel = new Map(parsed.data.answers.map((answer) => [answer.label.trim(), answer]))
  if (byLabel.size !== parsed.data.answers.length) throw new LlmError('invalid_reply', 'group scorer repeated a label')
  return labels.map((label) => {
    const answer = byLabel.get(label)
    if (!answer) throw new LlmError('invalid_reply', `group scorer gave no grades for answer ${label}`)
    return rubrics.map((rubric) => {
      const matches = answer.grades.filter((entry) => entry.rubric_id === rubric.id)
      if (matches.length !== 1)
        throw new LlmError('invalid_reply', `group scorer gave ${matches.length} grades for "${rubric.id}" of ${label}`)
      const grade = matches[0]!.grade
      if (!Number.isInteger(grade) || grade < 0 || grade > gradeMax)
        throw new LlmError(
          'invalid_reply',
          `group scorer grade ${grade} for "${rubric.id}" of ${label} is off the scale`,
        )
      return {
        rubric_id: rubric.id,
        grade,
        weight: rubric.weight,
        ...(rubric.kind === 'penalty' ? { penalty: true } : {}),
      }
    })
  })
}

/**
 * Grades a group of distinct responses in one call (retried on transport failures and invalid replies): a judgement
 * per response, in input order, on the same scale and formula as pointwise judging.
 * @example const judgements = await judgeGroup(model, { rubrics, rollouts, metadata, gradeMax: 10, locale: 'en', seed
 *   })
 */
export async function judgeGroup(
  model: ChatModel,
  input: GroupScorerInput,
  retry: Partial<RetryPolicy> = {},
): Promise<Judgement[]> {
  const { request, labels } = await buildGroupScorerRequest(input)
  return runAgent(
    model,
    request,
    (text) =>
      parseGroupScorerReply(text, labels, input.rubrics, input.gradeMax).map((criteria) => ({
        score: rewardFromGrades(criteria, input.gradeMax),
        criteria,
      })),
    retry,
  )
}
