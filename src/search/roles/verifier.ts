/**
 * The search's grader: one candidate, every criterion of a rubric, integer grades 0..grade_max (null = N/A when the
 * protocol allows it). The scale is stated in the prompt and enforced on the reply (fixes autosr §8.1). The stable
 * part of the request comes first for prefix caching — instructions and scale (system), then the rubric — then the
 * prompt and the candidate text inside data markers, and last the vote index and seed, so repeated votes are
 * distinct questions. The verifier grades extracted content (see extraction.ts); it never sees labels.
 */
import { z } from 'zod'
import { dataBoundary, parseReplyAs, runAgent } from '../../agents/run-agent.ts'
import { LlmError, type ChatModel, type ChatRequest } from '../../llm/types.ts'
import { renderPrompt, type Locale, type PromptOverrides } from '../../prompts/index.ts'
import { visibleCandidate, type Candidate, type CriterionGrades, type PromptItem, type Verifier } from '../types.ts'
import type { SearchRubric } from '../../schemas/search-rubric.ts'
import { searchLabels, type SearchRoleOptions } from './common.ts'
import { type ContentExtraction, DEFAULT_EXTRACTION } from '../../schemas/extraction.ts'
import { extractCandidate, extractPrompt } from './extraction.ts'
import { criteriaLines, isRecord } from './rubric.ts'
import { jsonMockReply } from '../../llm/mock.ts'
import { gradeSchema, keyedBy } from '../../llm/response-format.ts'
import { gradesReplyTokens } from '../../agents/scorer/index.ts'
import { answerSearchVerify, heuristicGrades } from './mock.ts'
import { askVerdicts, verdictRequests } from '../../agents/scorer/verdict.ts'
import { seededRandom } from '../../hash/index.ts'

export interface VerifierOptions extends SearchRoleOptions {
  /** What of the prompt and the candidate is graded; default the whole prompt and the candidate's answer part. */
  extraction?: ContentExtraction
  /** Mock backend only: the share of grades the heuristic flips, drawn from the vote's seed; default 0. */
  mockNoise?: number
  /**
   * `grades` (the default: one call grades every criterion) or `verdicts` (one Yes/No call per criterion, its grade
   * the judge's probability of Yes on the scale, unrounded; never N/A): see RunConfig.judging.
   */
  judging?: 'grades' | 'verdicts'
}

export interface GradeInput {
  item: PromptItem
  candidate: Candidate
  rubric: SearchRubric
  vote: number
  seed: number
}

/** Each rubric's criteria as prompt lines, per locale: the search grades every candidate under each rubric it keeps. */
const criteriaTexts = new WeakMap<SearchRubric, Partial<Record<Locale, string>>>()

/** `criteriaLines` of a rubric, rendered once: the search never changes a rubric it has built. */
function renderedCriteria(rubric: SearchRubric, locale: Locale): string {
  let texts = criteriaTexts.get(rubric)
  if (!texts) criteriaTexts.set(rubric, (texts = {}))
  return (texts[locale] ??= criteriaLines(rubric.criteria, locale))
}

/**
 * The verifier's request for one vote on one candidate.
 * @example const request = await buildVerifierRequest({ item, candidate, rubric, vote: 0, seed: 7 }, { locale: 'en' })
 * @internal
 */
export async function buildVerifierRequest(
  input: GradeInput,
  options: { locale: Locale; extraction?: ContentExtraction; prompts?: PromptOverrides; mockNoise?: number },
): Promise<ChatRequest> {
  const { item, rubric, vote, seed } = input
  const { locale, extraction = DEFAULT_EXTRACTION } = options
  const prompt = extractPrompt(item.prompt, extraction.prompt)
  const answer = extractCandidate(visibleCandidate(input.candidate).text, extraction.candidate)
  const { grade_max: gradeMax, allow_na: allowNa } = rubric.grading_protocol
  // Each block is tagged with a hash of its own text: the prompt's block is the same for every candidate of a prompt.
  const reference = item.reference ?? ''
  const [promptBoundary, referenceBoundary, boundary] = await Promise.all([
    dataBoundary(prompt),
    dataBoundary(reference),
    dataBoundary(answer),
  ])
  const user = renderPrompt(
    locale,
    'search-verifier.user',
    {
      criteria: renderedCriteria(rubric, locale),
      na_rule: searchLabels(locale).naRule(allowNa),
      prompt_boundary: promptBoundary,
      prompt,
      reference_boundary: referenceBoundary,
      reference,
      boundary,
      answer,
      vote,
      seed,
      grade_max: gradeMax,
    },
    options.prompts,
  )
  return {
    role: 'verifier',
    messages: [
      {
        role: 'system',
        content: renderPrompt(locale, 'search-verifier.system', { grade_max: gradeMax }, options.prompts),
      },
      { role: 'user', content: user },
    ],
    task: 'search_verify',
    json: true,
    maxTokens: gradesReplyTokens(rubric.criteria.length, 'none'),
    // Every criterion id once, an integer on the scale (or null where N/A is allowed), nothing else.
    jsonSchema: {
      name: 'verifier_grades',
      schema: keyedBy(
        ['grades'],
        keyedBy(
          rubric.criteria.map((criterion) => criterion.criterion_id),
          allowNa ? { anyOf: [gradeSchema(gradeMax), { type: 'null' }] } : gradeSchema(gradeMax),
        ),
      ),
    },
    seed,
    mock: jsonMockReply(answerSearchVerify, {
      prompt,
      answer,
      criteria: rubric.criteria,
      grade_max: gradeMax,
      allow_na: allowNa,
      vote,
      seed,
      noise: options.mockNoise ?? 0,
    }),
  }
}

const GradeValue = z.union([
  z.number(),
  z.string(),
  z.null(),
  z.object({ grade: z.union([z.number(), z.string(), z.null()]) }).transform((value) => value.grade),
])
const GradeEntry = z.object({
  criterion_id: z.string().optional(),
  id: z.string().optional(),
  grade: z.union([z.number(), z.string(), z.null()]),
})

/**
 * A verifier reply: `{"grades": {id: grade}}`, also `{"grades": [{criterion_id, grade}]}` or a flat `{id: grade}`
 * map. Values are read leniently by {@link parseVerifierReply}.
 */
const VerifierReply = z.preprocess(
  (value) => (isRecord(value) && !('grades' in value) ? { grades: value, flat: true } : value),
  z.object({
    grades: z.union([z.record(z.string(), z.unknown()), z.array(GradeEntry)]),
    flat: z.literal(true).optional(),
  }),
)

const NA_WORDS = new Set(['n/a', 'na', 'null', 'none', 'not applicable', '-'])

/**
 * Reads a verifier reply into grades keyed by criterion id, in rubric order. Lenient: fenced or sloppy JSON, the three
 * shapes of `VerifierReply`, numeric strings ("7", "7/10" when 10 is the scale's top), "n/a" for null, `{grade: …}`.
 * Strict: every criterion exactly once, integers within 0..grade_max, null only when the protocol allows N/A, no
 * unknown ids in a `grades` map. Anything else is an `invalid_reply`, never a silent 0.
 * @example parseVerifierReply('{"grades": {"task_fit": 8, "structure": "n/a"}}', rubric) // { task_fit: 8, structure:
 *   null }
 * @internal
 */
export function parseVerifierReply(text: string, rubric: SearchRubric): CriterionGrades {
  const { grade_max: gradeMax, allow_na: allowNa } = rubric.grading_protocol
  const reply = parseReplyAs(VerifierReply, text, 'verifier')
  const known = new Set(rubric.criteria.map((criterion) => criterion.criterion_id))
  const raw = new Map<string, unknown>()
  if (Array.isArray(reply.grades)) {
    for (const entry of reply.grades) {
      const id = entry.criterion_id ?? entry.id
      if (id === undefined) throw new LlmError('invalid_reply', 'verifier reply has a grade without a criterion id')
      if (raw.has(id)) throw new LlmError('invalid_reply', `verifier graded criterion "${id}" twice`)
      raw.set(id, entry.grade)
    }
  } else {
    // A flat map may carry prose fields ("reason") next to the grades; a `grades` map may not name unknown criteria.
    const flat = reply.flat === true
    for (const [id, value] of Object.entries(reply.grades)) {
      if (!known.has(id)) {
        if (flat) continue
        throw new LlmError(
          'invalid_reply',
          `verifier graded an unknown criterion "${id}"; the criteria are ${[...known].join(', ')}`,
        )
      }
      raw.set(id, value)
    }
  }
  const grades: CriterionGrades = {}
  for (const criterion of rubric.criteria) {
    const id = criterion.criterion_id
    if (!raw.has(id)) throw new LlmError('invalid_reply', `verifier gave no grade for criterion "${id}"`)
    grades[id] = readGrade(raw.get(id), id, gradeMax, allowNa)
  }
  return grades
}

function readGrade(value: unknown, id: string, gradeMax: number, allowNa: boolean): number | null {
  const parsed = GradeValue.safeParse(value)
  let grade: number | null
  if (!parsed.success)
    throw new LlmError('invalid_reply', `verifier grade for "${id}" is not a number or null: ${JSON.stringify(value)}`)
  const raw = parsed.data
  if (raw === null) grade = null
  else if (typeof raw === 'number') grade = raw
  else {
    const textual = raw.trim().toLowerCase()
    const fraction = textual.match(/^(-?\d+(?:\.\d+)?)\s*(?:\/|out of)\s*(\d+)$/)
    if (NA_WORDS.has(textual)) grade = null
    else if (fraction) {
      if (Number(fraction[2]) !== gradeMax)
        throw new LlmError('invalid_reply', `verifier grade "${raw}" for "${id}" is not on the 0..${gradeMax} scale`)
      grade = Number(fraction[1])
    } else if (/^-?\d+(?:\.\d+)?$/.test(textual)) grade = Number(textual)
    else
      throw new LlmError('invalid_reply', `verifier grade for "${id}" is not a number or null: ${JSON.stringify(raw)}`)
  }
  if (grade === null) {
    if (!allowNa)
      throw new LlmError('invalid_reply', `verifier answered N/A for "${id}", but this rubric does not allow N/A`)
    return null
  }
  if (!Number.isInteger(grade) || grade < 0 || grade > gradeMax) {
    throw new LlmError('invalid_reply', `verifier grade ${grade} for "${id}" is not an integer in 0..${gradeMax}`)
  }
  return grade
}

/**
 * The LLM verifier: one call per vote, retried on transport failures and invalid replies. With `MockChatModel` the
 * reply is autosr's HeuristicVerifier on the integer scale (check points, negative examples, length), with optional
 * noise drawn from the vote's seed, through the same parsing path.
 * @example
 * const verifier = new LlmVerifier(new MockChatModel(), { locale: 'en' })
 * const grades = await verifier.grade({ item, candidate, rubric, vote: 0, seed: 7 }) // { task_fit: 10, structure: 5, …
 * }
 */
export class LlmVerifier implements Verifier {
  constructor(
    private readonly model: ChatModel,
    private readonly options: VerifierOptions = {},
  ) {}

  /**
   * One vote's grades of `input.candidate` on every criterion of `input.rubric`, keyed by criterion id.
   * @example const grades = await verifier.grade({ item, candidate, rubric, vote: 1, seed: 7 }); rubricScore(grades,
   *   rubric).score
   */
  async grade(input: GradeInput): Promise<CriterionGrades> {
    const { locale = 'en', extraction, prompts, retry, mockNoise } = this.options
    if (this.options.judging === 'verdicts') return this.#verdicts(input)
    const request = await buildVerifierRequest(input, {
      locale,
      ...(extraction ? { extraction } : {}),
      ...(prompts ? { prompts } : {}),
      ...(mockNoise === undefined ? {} : { mockNoise }),
    })
    return runAgent(this.model, request, (text) => parseVerifierReply(text, input.rubric), retry)
  }

  /** One Yes/No call per criterion on the extracted prompt and answer; each grade P(Yes) × grade_max. */
  async #verdicts(input: GradeInput): Promise<CriterionGrades> {
    const { locale = 'en', extraction = DEFAULT_EXTRACTION, prompts, retry, mockNoise = 0 } = this.options
    const { criteria, grading_protocol: protocol } = input.rubric
    const prompt = extractPrompt(input.item.prompt, extraction.prompt)
    const answer = extractCandidate(visibleCandidate(input.candidate).text, extraction.candidate)
    const requests = await verdictRequests({
      role: 'verifier',
      task: 'search_verify',
      criteria,
      input: prompt,
      output: answer,
      reference: input.item.reference ?? '',
      locale,
      prompts,
      mockShares: () => {
        const random = seededRandom('search-verify', input.seed, input.vote)
        const grades = heuristicGrades(answer, criteria, protocol.grade_max, random, mockNoise)
        return criteria.map((criterion) => (grades[criterion.criterion_id] ?? 0) / protocol.grade_max)
      },
    })
    const shares = await askVerdicts(this.model, requests, locale, retry)
    return Object.fromEntries(
      criteria.map((criterion, index) => [criterion.criterion_id, shares[index]! * protocol.grade_max]),
    )
  }
}
