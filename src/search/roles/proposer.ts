/**
 * The search's mutation operator: an LLM rewrites the current rubric in one of six modes (autosr §3.3 contracts,
 * in the prompt). It sees the prompt and two answer TEXTS: the one the CURRENT rubric scores higher and the
 * runner-up. It is told that this order is the current rubric's, not ground truth — labels never reach it
 * (fixes autosr §8.2), and it is never told which answer is truly better.
 *
 * The child is validated (unique ids, positive weights, at most MAX_CRITERIA, renormalised, not identical to the
 * parent, and the mode's checkable contract); a child failing validation is an invalid reply and is asked for
 * again. Its id is `<base>_m<hash8>` over its content, so ids never grow along a lineage.
 */
import { dataBoundary, parseReplyAs, runAgent } from '../../agents/run-agent.ts'
import type { ChatModel, ChatRequest } from '../../llm/types.ts'
import { LlmError } from '../../llm/types.ts'
import { renderPrompt, type Locale, type PromptOverrides } from '../../prompts/index.ts'
import { visibleCandidate, type Candidate, type MutationMode, type PromptItem, type RubricProposer } from '../types.ts'
import { rubricFromParsedParts, type SearchRubric, type Criterion } from '../../schemas/search-rubric.ts'
import type { SearchRoleOptions } from './common.ts'
import { normalisedWeights } from './score.ts'
import {
  criteriaFromReply,
  criteriaJson,
  MAX_CRITERIA,
  mutatedRubricId,
  RubricReply,
  rubricReplySchema,
  sameCriteria,
  validateCriteria,
} from './rubric.ts'
import { jsonMockReply } from '../../llm/mock.ts'
import { answerSearchPropose } from './mock.ts'
import { withReplySchema } from '../../llm/response-format.ts'

export interface ProposerOptions extends SearchRoleOptions {
  /** Refuse a child that breaks its mode's checkable contract (see `modeContractViolation`); default true. */
  enforceModeContract?: boolean
}

export interface ProposalInput {
  item: PromptItem
  rubric: SearchRubric
  mode: MutationMode
  /** The candidate the current rubric ranks first (not ground truth); only its text is shown. */
  top: Candidate
  /** The candidate the current rubric ranks second; only its text is shown. */
  runnerUp: Candidate
  seed: number
}

/**
 * The proposer's request: instructions with every mode's contract and the grade scale (system); then the mode,
 * the current criteria as JSON, and the prompt and the two answer texts inside data markers.
 * @example const request = await buildProposerRequest({ item, rubric, mode: 'decompose', top, runnerUp, seed: 7 }, {
 *   locale: 'en' })
 * @internal
 */
export async function buildProposerRequest(
  input: ProposalInput,
  options: { locale: Locale; prompts?: PromptOverrides },
): Promise<ChatRequest> {
  const { item, rubric, mode, seed } = input
  const top = visibleCandidate(input.top).text
  const runnerUp = visibleCandidate(input.runnerUp).text
  const boundary = await dataBoundary(item.prompt, top, runnerUp)
  const user = renderPrompt(
    options.locale,
    'search-proposer.user',
    {
      mode,
      rubric: criteriaJson(rubric.criteria),
      boundary,
      prompt: item.prompt,
      top,
      runner_up: runnerUp,
    },
    options.prompts,
  )
  return {
    role: 'proposer',
    messages: [
      {
        role: 'system',
        content: renderPrompt(
          options.locale,
          'search-proposer.system',
          { grade_max: rubric.grading_protocol.grade_max },
          options.prompts,
        ),
      },
      { role: 'user', content: user },
    ],
    task: 'search_propose',
    json: true,
    ...withReplySchema('rubric', rubricReplySchema(1, MAX_CRITERIA)),
    seed,
    mock: jsonMockReply(answerSearchPropose, {
      prompt: item.prompt,
      criteria: rubric.criteria,
      mode,
      top,
      runner_up: runnerUp,
      seed,
    }),
  }
}

/**
 * What a child breaks of its mode's contract, as far as it can be checked mechanically; undefined when nothing.
 * Every mode: the child must differ from the parent. raise_bar, factual_focus, counterexample_trigger: at most one
 * criterion more, none fewer. decompose: more criteria than the parent (unless the parent is at MAX_CRITERIA).
 * anti_fluff: a new or changed criterion with negative examples. weight_perturb: the same ids and texts, in order.
 * @example modeContractViolation(parent.criteria, child.criteria, 'weight_perturb') // 'weight_perturb changed the text
 *   of "c1"'
 * @internal
 */
export function modeContractViolation(
  parent: readonly Criterion[],
  child: readonly Criterion[],
  mode: MutationMode,
): string | undefined {
  if (sameCriteria(parent, child)) return `${mode} returned the rubric unchanged`
  const delta = child.length - parent.length
  switch (mode) {
    case 'raise_bar':
    case 'factual_focus':
    case 'counterexample_trigger':
      return delta < 0 || delta > 1
        ? `${mode} may add at most one criterion and remove none (${parent.length} → ${child.length})`
        : undefined
    case 'decompose':
      return delta < 1 && parent.length < MAX_CRITERIA
        ? `decompose must split a criterion into two or more (${parent.length} → ${child.length} criteria)`
        : undefined
    case 'anti_fluff': {
      // New, reworded, or weighted up (on normalised weights) — and it lists negative examples.
      const parentWeights = normalisedWeights(parent.map((criterion) => criterion.weight))
      const childWeights = normalisedWeights(child.map((criterion) => criterion.weight))
      const before = new Map(
        parent.map((criterion, index) => [
          criterion.criterion_id,
          { content: contentKey(criterion), weight: parentWeights[index]! },
        ]),
      )
      const touched = child.some((criterion, index) => {
        if (criterion.negative_examples.length === 0) return false
        const old = before.get(criterion.criterion_id)
        return !old || old.content !== contentKey(criterion) || childWeights[index]! > old.weight + 1e-9
      })
      return touched ? undefined : 'anti_fluff must add or strengthen a criterion with negative examples'
    }
    case 'weight_perturb': {
      if (child.length !== parent.length)
        return `weight_perturb changed the number of criteria (${parent.length} → ${child.length})`
      const changed = child.find(
        (criterion, index) =>
          criterion.criterion_id !== parent[index]!.criterion_id || criterion.text !== parent[index]!.text,
      )
      return changed ? `weight_perturb changed the id or text of "${changed.criterion_id}"` : undefined
    }
  }
}

function contentKey(criterion: Criterion): string {
  const { weight: _weight, ...content } = criterion
  return JSON.stringify(content)
}

/**
 * Reads a proposer reply into the child's criteria: lenient JSON and criteria, then validation (unique ids,
 * positive weights, 1..MAX_CRITERIA, renormalised) and, unless disabled, the mode contract. Anything else is an
 * `invalid_reply`.
 * @example parseProposerReply(replyText, parent, 'anti_fluff')
 * @internal
 */
export function parseProposerReply(
  text: string,
  parent: SearchRubric,
  mode: MutationMode,
  options: { enforceModeContract?: boolean } = {},
): Criterion[] {
  const payload = parseReplyAs(RubricReply, text, 'proposer')
  const criteria = validateCriteria(criteriaFromReply(payload, 'proposer'), {
    min: 1,
    max: MAX_CRITERIA,
    agent: 'proposer',
  })
  if (options.enforceModeContract ?? true) {
    const violation = modeContractViolation(parent.criteria, criteria, mode)
    if (violation) throw new LlmError('invalid_reply', `proposer reply breaks the ${mode} contract: ${violation}`)
  }
  return criteria
}

/**
 * The LLM proposer. With `MockChatModel` the reply is autosr's TemplateProposer (seeded by `seed`) through the same
 * parsing path. The child keeps the parent's grading protocol; metadata records origin, mode, parent and model.
 * `weight_perturb` of a single-criterion rubric cannot change it: the parent is returned without a call.
 * @example
 * const proposer = new LlmRubricProposer(new MockChatModel(), { locale: 'en' })
 * const child = await proposer.propose({ item, rubric, mode: 'anti_fluff', top, runnerUp, seed: 7 }) // id 'p1_r0_m…'
 */
export class LlmRubricProposer implements RubricProposer {
  constructor(
    private readonly model: ChatModel,
    private readonly options: ProposerOptions = {},
  ) {}

  /**
   * One validated child of `input.rubric` in `input.mode`.
   * @example const child = await proposer.propose({ item, rubric, mode: 'decompose', top, runnerUp, seed: 7 })
   */
  async propose(input: ProposalInput): Promise<SearchRubric> {
    const { locale = 'en', prompts, retry, enforceModeContract = true } = this.options
    // Reweighting a lone criterion changes nothing once weights are normalised: no call, the parent comes back.
    if (input.mode === 'weight_perturb' && input.rubric.criteria.length === 1) return structuredClone(input.rubric)
    const request = await buildProposerRequest(input, { locale, ...(prompts ? { prompts } : {}) })
    const criteria = await runAgent(
      this.model,
      request,
      (text) => parseProposerReply(text, input.rubric, input.mode, { enforceModeContract }),
      retry,
    )
    const grading_protocol = structuredClone(input.rubric.grading_protocol)
    // The criteria passed `Criterion` one by one in parseProposerReply; the protocol is the parsed parent's.
    return rubricFromParsedParts({
      rubric_id: await mutatedRubricId(input.rubric.rubric_id, { criteria, grading_protocol }),
      criteria,
      grading_protocol,
      metadata: { origin: 'proposer', mode: input.mode, parent_id: input.rubric.rubric_id, model: this.model.id },
    })
  }
}
