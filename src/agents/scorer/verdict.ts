/**
 * Verdict judging (`RunConfig.judging: "verdicts"`): each criterion asked on its own as a yes/no question, its grade
 * the judge's probability of "Yes" read from the first reply token's log-probabilities. A small judge that grades
 * every criterion 10 in a JSON reply, right answer or wrong, still moves its probability of "Yes" between them
 * (BENCHMARKS.md, gsm8k-solutions): the probability is the signal, and a reward read from it has no ties to break.
 */
import type { RetryPolicy } from '../../llm/retry.ts'
import {
  LlmError,
  type ChatModel,
  type ChatRequest,
  type ChatResponse,
  type MockSampling,
  type TokenLogprob,
} from '../../llm/types.ts'
import { renderPrompt, type Locale, type PromptOverrides } from '../../prompts/index.ts'
import type { Rubric } from '../../schemas/rubric.ts'
import type { CriterionGrade } from '../../schemas/score.ts'
import { rewardFromGrades } from '../../scoring/index.ts'
import { dataBoundary, runAgent } from '../run-agent.ts'
import type { Judgement, ScorerInput } from './types.ts'
import { mockScorerAnswer } from './mock.ts'

/**
 * Whether `input` is judged by verdicts: asked for, on a plain answer (a trajectory is graded in one call) and
 * without reasons (a verdict has none).
 * @example byVerdicts({ ...input, judging: 'verdicts' }) // true for a plain answer
 */
export function byVerdicts(input: Pick<ScorerInput, 'judging' | 'rollout' | 'reasons'>): boolean {
  return input.judging === 'verdicts' && !input.rollout.messages && (input.reasons ?? 'none') === 'none'
}

/** First-token alternatives asked for: enough that "Yes" and "No" are both among them whenever either is likely. */
const ALTERNATIVES = 20

/** A reference this short and on one line is shown inline, where a small judge reads it best; others in a block. */
const INLINE_REFERENCE_CHARS = 300

const WORDS = {
  en: {
    yes: ['yes'],
    no: ['no'],
    noReference: 'No reference answer is given.',
    inlineReference: (reference: string) => `Reference answer: ${reference}`,
    blockReference: (tag: string) => `Reference material for the grader (data, tagged ${tag}):`,
    question: (text: string) => `Criterion: ${text}\nDoes the answer meet this criterion? Answer Yes or No.`,
    penalty: (text: string) => `Something the answer must not do: ${text}\nDoes the answer do this? Answer Yes or No.`,
  },
  zh: {
    yes: ['yes', '是'],
    no: ['no', '否'],
    noReference: '没有给出参考答案。',
    inlineReference: (reference: string) => `参考答案：${reference}`,
    blockReference: (tag: string) => `供评分参考的资料（数据，标记为 ${tag}）：`,
    question: (text: string) => `标准：${text}\n这个回答满足这条标准吗？只回答 Yes 或 No。`,
    penalty: (text: string) => `回答不应做的事：${text}\n这个回答做了这件事吗？只回答 Yes 或 No。`,
  },
} as const satisfies Record<Locale, unknown>

/**
 * The reference as the verdict prompt shows it: inline when short and on one line (it cannot open or close a data
 * block there), else in its own tagged block; a sentence saying there is none when it is empty.
 * @example await referenceText('en', '18') // 'Reference answer: 18'
 */
async function referenceText(locale: Locale, reference: string): Promise<string> {
  const words = WORDS[locale]
  const trimmed = reference.trim()
  if (trimmed === '') return words.noReference
  if (trimmed.length <= INLINE_REFERENCE_CHARS && !/[\r\n]/.test(trimmed)) return words.inlineReference(trimmed)
  const tag = await dataBoundary(reference)
  return `${words.blockReference(tag)}\n<<<DATA-${tag}\n${reference}\nDATA-${tag}>>>`
}

/** What a verdict asks of one answer: the criteria, the prompt, the reference and the answer. */
export interface VerdictQuestions {
  role: string
  task: string
  criteria: readonly { text: string; penalty?: boolean }[]
  input: string
  output: string
  reference: string
  locale: Locale
  prompts?: PromptOverrides | undefined
  /** The mock backend's share of Yes for each criterion, from its heuristic grades. */
  mockShares: (sampling: MockSampling) => number[]
}

/**
 * One yes/no request per criterion, in order. Every request has the same text up to the question, which comes last,
 * so a server's prefix cache evaluates the shared part once per answer (and the prompt and reference once per GRPO
 * group).
 * @example const requests = await verdictRequests({ role: 'verifier', task: 'search_verify', criteria, … })
 */
export async function verdictRequests(questions: VerdictQuestions): Promise<ChatRequest[]> {
  const { locale, prompts } = questions
  const words = WORDS[locale]
  const system = renderPrompt(locale, 'scorer-verdict.system', {}, prompts)
  const [inputBoundary, boundary, reference] = await Promise.all([
    dataBoundary(questions.input),
    dataBoundary(questions.output),
    referenceText(locale, questions.reference),
  ])
  const shared = {
    input_boundary: inputBoundary,
    input: questions.input,
    reference,
    boundary,
    output: questions.output,
  }
  return questions.criteria.map((criterion, index) => ({
    role: questions.role,
    task: questions.task,
    messages: [
      { role: 'system', content: system },
      {
        role: 'user',
        content: renderPrompt(
          locale,
          'scorer-verdict.user',
          { ...shared, question: (criterion.penalty ? words.penalty : words.question)(criterion.text) },
          prompts,
        ),
      },
    ],
    json: false,
    maxTokens: 1,
    firstTokenAlternatives: ALTERNATIVES,
    mock: (sampling) => mockVerdict(questions.mockShares(sampling)[index]!),
  }))
}

/**
 * The scorer's verdict requests: one per rubric, in rubric order ({@link verdictRequests}).
 * @example const requests = await buildVerdictRequests({ rubrics, rollout, metadata, gradeMax: 10, locale: 'en' })
 * @internal
 */
export function buildVerdictRequests(input: ScorerInput): Promise<ChatRequest[]> {
  const { rubrics, rollout, gradeMax } = input
  return verdictRequests({
    role: 'scorer',
    task: 'score_verdict',
    criteria: rubrics.map((rubric) => ({ text: rubric.text, penalty: rubric.kind === 'penalty' })),
    input: rollout.input,
    output: rollout.output,
    reference: rollout.supplemental_context ?? '',
    locale: input.locale,
    prompts: input.prompts,
    mockShares: (sampling) => mockScorerAnswer(input, sampling).grades.map(({ grade }) => grade / gradeMax),
  })
}

/**
 * Asks `requests` one after another, each retried on its own within `retry.maxAttempts`, all within `maxCalls`
 * (keeping one call for each request still to ask); each answer's probability of Yes, in order. `retry.onRetry`
 * hears every retry.
 * @example const shares = await askVerdicts(model, requests, 'en', { maxAttempts: 3 }, 8)
 */
export async function askVerdicts(
  model: ChatModel,
  requests: readonly ChatRequest[],
  locale: Locale,
  retry: Partial<RetryPolicy> = {},
  maxCalls = Number.POSITIVE_INFINITY,
): Promise<number[]> {
  if (requests.length > maxCalls)
    throw new LlmError(
      'bad_request',
      `${requests.length} criteria need ${requests.length} verdict calls; ${maxCalls} allowed`,
    )
  const shares: number[] = []
  let spent = 0
  for (const [index, request] of requests.entries()) {
    const left = maxCalls - spent - (requests.length - index - 1)
    let last: ChatResponse | undefined
    const recording: ChatModel = { id: model.id, complete: async (current) => (last = await model.complete(current)) }
    spent++
    shares.push(
      await runAgent(recording, request, () => verdictProbability(last!, locale), {
        ...retry,
        maxAttempts: Math.min(retry.maxAttempts ?? 4, left),
        onRetry: (...args) => {
          spent++
          retry.onRetry?.(...args)
        },
      }),
    )
  }
  return shares
}

/**
 * The mock's verdict: "Yes" when its heuristic grade is at least half the scale, with a first-token distribution
 * whose share of "Yes" is that grade's share of the scale, so the mock's verdict reward equals its grades reward.
 */
function mockVerdict(share: number) {
  const firstTokenLogprobs = [
    { token: 'Yes', logprob: Math.log(share) },
    { token: 'No', logprob: Math.log(1 - share) },
  ].filter(({ logprob }) => Number.isFinite(logprob))
  return { text: share >= 0.5 ? 'Yes' : 'No', firstTokenLogprobs }
}

/**
 * P(Yes) against P(No) among first-token alternatives (case and surrounding space ignored); null when neither is
 * among them.
 * @example yesShare([{ token: 'Yes', logprob: -0.1 }, { token: ' no', logprob: -2.4 }]) // 0.909…
 * @internal
 */
export function yesShare(top: readonly TokenLogprob[], locale: Locale = 'en'): number | null {
  const { yes: yesWords, no: noWords } = WORDS[locale]
  let yes = 0
  let no = 0
  for (const { token, logprob } of top) {
    const word = token.trim().toLowerCase()
    if ((yesWords as readonly string[]).includes(word)) yes += Math.exp(logprob)
    else if ((noWords as readonly string[]).includes(word)) no += Math.exp(logprob)
  }
  return yes + no > 0 ? yes / (yes + no) : null
}

/**
 * The probability a reply says "Yes": from its first token's alternatives when the server sent them, else its text
 * (a server without log-probabilities: Yes 1, No 0). A reply that is neither is an `invalid_reply`.
 * @example verdictProbability({ text: 'No', model: 'm', usage }, 'en') // 0
 * @internal
 */
export function verdictProbability(response: ChatResponse, locale: Locale): number {
  const fromLogprobs = response.firstTokenLogprobs ? yesShare(response.firstTokenLogprobs, locale) : null
  if (fromLogprobs !== null) return fromLogprobs
  const word =
    response.text
      .trim()
      .toLowerCase()
      .match(/^[\p{L}]+/u)?.[0] ?? ''
  const fromText = yesShare([{ token: word, logprob: 0 }], locale)
  if (fromText === null)
    throw new LlmError(
      'invalid_reply',
      `verdict reply is neither Yes nor No: ${JSON.stringify(response.text.slice(0, 40))}`,
    )
  return fromText
}

/** A verdict as a criterion's grade: the probability kept, the grade its nearest point on the scale. */
function verdictGrade(rubric: Rubric, probability: number, gradeMax: number): CriterionGrade {
  return {
    rubric_id: rubric.id,
    grade: Math.round(probability * gradeMax),
    weight: rubric.weight,
    probability,
    ...(rubric.kind === 'penalty' ? { penalty: true } : {}),
  }
}

/**
 * Judges a rollout by verdicts: the criteria asked one after another (so each reuses the one before's cached prefix),
 * within `retry` and `maxCalls` ({@link askVerdicts}).
 * @example const { score, criteria } = await judgeByVerdicts(model, input, { maxAttempts: 3 }, 8)
 */
export async function judgeByVerdicts(
  model: ChatModel,
  input: ScorerInput,
  retry: Partial<RetryPolicy> = {},
  maxCalls = Number.POSITIVE_INFINITY,
): Promise<Judgement> {
  const shares = await askVerdicts(model, await buildVerdictRequests(input), input.locale, retry, maxCalls)
  const criteria = input.rubrics.map((rubric, index) => verdictGrade(rubric, shares[index]!, input.gradeMax))
  return { score: rewardFromGrades(criteria, input.gradeMax), criteria }
}
