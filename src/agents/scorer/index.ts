import { z } from 'zod'
import { canonicalJson, sha256Hex } from '../../hash/index.ts'
import type { RetryPolicy } from '../../llm/retry.ts'
import { closedObject, gradeSchema, keyedBy, type JsonObjectSchema } from '../../llm/response-format.ts'
import { LlmError, type ChatModel, type ChatRequest } from '../../llm/types.ts'
import { promptTemplate, renderPrompt, type Locale, type PromptOverrides } from '../../prompts/index.ts'
import type { Rollout, TrainingMetadata } from '../../schemas/rollout.ts'
import { taskLength, taskText, type Trajectory } from '../../schemas/trajectory.ts'
import type { Rubric } from '../../schemas/rubric.ts'
import type { CriterionGrade } from '../../schemas/score.ts'
import { rewardFromGrades } from '../../scoring/index.ts'
import { dataBoundary, PENALTY_LABEL, parseLenientJson, runAgent } from '../run-agent.ts'
import { mockScorerReply } from './mock.ts'
import { renderTrajectoryTurns } from './trajectory.ts'
import type { Judgement, ScorerInput, ScorerReasons } from './types.ts'
import { byVerdicts, judgeByVerdicts } from './verdict.ts'

export type { Judgement, ScorerInput, ScorerReasons } from './types.ts'
export { byVerdicts } from './verdict.ts'

/** Grades keyed by rubric id (what the prompt asks for), or the older list of `{rubric_id, grade, reason}` entries. */
const ScorerReply = z.object({
  grades: z.union([
    z.record(z.string(), z.number()),
    z.array(z.object({ rubric_id: z.string(), grade: z.number(), reason: z.string().optional() })),
  ]),
  reasons: z.record(z.string(), z.string()).optional(),
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
 * The one chat request that grades every rubric for a rollout, laid out for an inference server's prefix cache: what
 * changes least comes first (instructions, rubrics, training context, the group's prompt and reference), the answer
 * last. Each data block is tagged with a hash of its own text, so no text can forge its own closing marker, and no
 * block before the answer depends on the answer.
 * @example const request = await buildScorerRequest({ rubrics, rollout, metadata, gradeMax: 10, locale: 'en' })
 */
export async function buildScorerRequest(input: ScorerInput): Promise<ChatRequest> {
  const { rubrics, rollout, metadata, gradeMax, locale } = input
  const reference = rollout.supplemental_context ?? ''
  const system = renderPrompt(
    locale,
    'scorer.system',
    { grade_max: gradeMax, reply_format: REPLY_FORMAT[locale][input.reasons ?? 'none'](gradeMax) },
    input.prompts,
  )
  const user = rollout.messages
    ? await trajectoryPrompt(input, rollout.messages, reference)
    : renderPrompt(
        locale,
        'scorer.user',
        {
          rubrics: rubrics.map(rubricLine).join('\n'),
          ...trainingVars(metadata),
          ...(await groupBlockTags(rollout.input, reference)),
          input: rollout.input,
          reference,
          boundary: await dataBoundary(rollout.output),
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
    maxTokens: gradesReplyTokens(rubrics.length, input.reasons ?? 'none'),
    jsonSchema: {
      name: 'grades',
      schema: gradesSchema(
        rubrics.map((rubric) => rubric.id),
        gradeMax,
        input.reasons ?? 'none',
      ),
    },
  }
}

/**
 * The user message for a trajectory: the same leading blocks as a plain answer's (rubrics, training context, the task
 * and the reference, which a GRPO group shares), then each turn after the task in its own block.
 */
async function trajectoryPrompt(input: ScorerInput, messages: Trajectory, reference: string): Promise<string> {
  const task = taskLength(messages) > 0 ? taskText(messages) : input.rollout.input
  const { turns, toolSummary } = await renderTrajectoryTurns(messages, input.locale)
  return renderPrompt(
    input.locale,
    'scorer-trajectory.user',
    {
      rubrics: input.rubrics.map(rubricLine).join('\n'),
      ...trainingVars(input.metadata),
      ...(await groupBlockTags(task, reference)),
      input: task,
      reference,
      tool_summary: toolSummary,
      turns,
    },
    input.prompts,
  )
}

/** The longest reason a grades reply may give a criterion (its JSON schema's `maxLength`). */
const REASON_MAX_CHARS = 300
/** The tokens a reason of `REASON_MAX_CHARS` characters may take (2.5 characters a token, rounded up). */
const REASON_MAX_TOKENS = Math.ceil(REASON_MAX_CHARS / 2.5)

/**
 * The exact JSON schema of a grades reply: every rubric id once, no other key, each grade an integer in 0..gradeMax,
 * and a string reason per id when reasons are asked for. A server that enforces it cannot send a reply the parser
 * refuses.
 * @example gradesSchema(['a1', 'd1'], 10, 'none').required // ['grades']
 */
function gradesSchema(ids: readonly string[], gradeMax: number, reasons: ScorerReasons): JsonObjectSchema {
  const grades = keyedBy(ids, gradeSchema(gradeMax))
  if (reasons === 'none') return closedObject({ grades })
  return closedObject({ grades, reasons: keyedBy(ids, { type: 'string', maxLength: REASON_MAX_CHARS }) })
}

/**
 * The most tokens a grades reply can need, at 2.5 characters a token: per criterion an entry (its id of up to 40
 * characters, grade and punctuation), and when reasons are asked a second entry with a reason as long as the schema
 * allows; a reply cut short fails the call, so this errs on the long side.
 * @example gradesReplyTokens(5, 'none') // 192
 */
export function gradesReplyTokens(criteria: number, reasons: ScorerReasons, answers = 1): number {
  const perCriterion = reasons === 'short' ? 2 * ENTRY_TOKENS + REASON_MAX_TOKENS : ENTRY_TOKENS
  return 64 + answers * (8 + criteria * perCriterion)
}

/** The tokens of one criterion's entry in a reply: `"<id of up to 40 characters>": <grade>, ` at 2.5 a token. */
const ENTRY_TOKENS = 24

/**
 * The tags of the blocks a GRPO group shares (its prompt and reference), each a hash of its own text only, so every
 * answer to the prompt gets the same leading blocks.
 * @example const { input_boundary, reference_boundary } = await groupBlockTags(rollout.input, reference)
 */
export async function groupBlockTags(
  input: string,
  reference: string,
): Promise<{ input_boundary: string; reference_boundary: string }> {
  const [inputBoundary, referenceBoundary] = await Promise.all([dataBoundary(input), dataBoundary(reference)])
  return { input_boundary: inputBoundary, reference_boundary: referenceBoundary }
}

const REPLY_FORMAT = {
  en: {
    none: (gradeMax: number) =>
      `{"grades": {"<criterion id>": <integer 0..${gradeMax}>}}\n` +
      'Give exactly one grade per criterion, using the ids as listed, and nothing else.',
    short: (gradeMax: number) =>
      `{"grades": {"<criterion id>": <integer 0..${gradeMax}>}, ` +
      '"reasons": {"<criterion id>": "<one short sentence>"}}\n' +
      'Give exactly one grade and one reason per criterion, using the ids as listed.',
  },
  zh: {
    none: (gradeMax: number) =>
      `{"grades": {"<标准 id>": <0..${gradeMax} 的整数>}}\n每条标准恰好一个分数，使用列出的 id，不要输出其他内容。`,
    short: (gradeMax: number) =>
      `{"grades": {"<标准 id>": <0..${gradeMax} 的整数>}, "reasons": {"<标准 id>": "<一句简短理由>"}}\n` +
      '每条标准恰好一个分数和一句理由，使用列出的 id。',
  },
} as const satisfies Record<Locale, Record<ScorerReasons, (gradeMax: number) => string>>

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
  const { grades, reasons = {} } = parsed.data
  if (Array.isArray(grades)) {
    for (const entry of grades) {
      if (byId.has(entry.rubric_id))
        throw new LlmError('invalid_reply', `scorer graded rubric "${entry.rubric_id}" twice`)
      byId.set(entry.rubric_id, entry)
    }
  } else {
    for (const [id, grade] of Object.entries(grades)) byId.set(id, { grade, reason: reasons[id] })
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
 * Grades a rollout: one call, parsed and validated, retried with backoff on transport failures and invalid replies;
 * or, under `judging: "verdicts"`, one call per criterion ({@link judgeByVerdicts}, at most `maxCalls` in all).
 * @example const { score, criteria } = await judgeRollout(model, input, { maxAttempts: 4 })
 */
export async function judgeRollout(
  model: ChatModel,
  input: ScorerInput,
  retry: Partial<RetryPolicy> = {},
  maxCalls?: number,
): Promise<Judgement> {
  if (byVerdicts(input)) return judgeByVerdicts(model, input, retry, maxCalls)
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
  judging: ScorerInput['judging'] = 'grades',
): Promise<string> {
  const verdicts = byVerdicts({ judging, rollout })
  const [systemPrompt, userPrompt] = verdicts
    ? (['scorer-verdict.system', 'scorer-verdict.user'] as const)
    : (['scorer.system', rollout.messages ? 'scorer-trajectory.user' : 'scorer.user'] as const)
  return sha256Hex(
    canonicalJson({
      model: modelId,
      prompts: [
        prompts[`${locale}/${systemPrompt}`] ?? promptTemplate(locale, systemPrompt),
        prompts[`${locale}/${userPrompt}`] ?? promptTemplate(locale, userPrompt),
      ],
      ...(verdicts ? { judging } : {}),
      grade_max: gradeMax,
      rollout: {
        input: rollout.input,
        output: rollout.output,
        supplemental_context: rollout.supplemental_context ?? '',
        // A trajectory is judged by its structure: the same text with a made call or a claimed one is another rollout.
        ...(rollout.messages ? { messages: rollout.messages } : {}),
      },
      metadata,
    }),
  )
}
