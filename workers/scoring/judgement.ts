import { byVerdicts, judgeRollout, type Judgement, type ScorerInput } from '../../src/agents/scorer/index.ts'
import { budgetError, judgeBudgetRefusal, verdictBudgetRefusal } from '../../src/budgets/index.ts'
import { AppError, contextLengthExceeded, type ErrorCode } from '../../src/errors/index.ts'
import { LlmError } from '../../src/llm/index.ts'
import type { ScoreRequest } from '../../src/schemas/rollout.ts'
import type { RunConfig } from '../../src/schemas/run-config.ts'
import type { RubricSnapshot } from '../../src/schemas/rubric.ts'
import type { RoleModel } from './models.ts'

/** An AppError as it crosses an RPC boundary. */
export interface WireError {
  code: ErrorCode
  message: string
  status: number
  details?: unknown
  retryAfterSeconds?: number
}

/**
 * One judgement as it crosses an RPC boundary: the judgement, or the model's failure; either way the LLM calls it
 * spent, which count against the rollout's `budgets.judge_calls_per_rollout`.
 */
export type ChunkOutcome = ({ ok: true; judgement: Judgement } | { ok: false; error: WireError }) & { calls: number }

/**
 * What the scorer is asked about one rollout on `rubrics`, graded the run's way (scale, locale, prompts, judging):
 * the same for a `/score` and for any later re-judgement of what it recorded.
 * @example const input = scorerInputOf(run.config, snapshot.rubrics, request, run.config.reasons)
 */
export function scorerInputOf(
  config: RunConfig,
  rubrics: ScorerInput['rubrics'],
  item: Pick<ScoreRequest, 'rollout' | 'metadata'>,
  reasons?: ScorerInput['reasons'],
): ScorerInput {
  return {
    rubrics,
    rollout: item.rollout,
    metadata: item.metadata,
    gradeMax: config.grade_max,
    locale: config.locale,
    prompts: config.prompts,
    judging: config.judging,
    ...(reasons ? { reasons } : {}),
  }
}

/**
 * One judgement as both ends of the fan-out report it (judged here, or in a handed-out chunk): the judgement, or the
 * model's failure (an AppError) as a wire error, with the LLM calls it spent (at most `maxCalls`); any other error is
 * thrown.
 * @example const outcome = await judgeOutcome(scorer, config, snapshot, request, 8)
 */
export async function judgeOutcome(
  scorer: RoleModel,
  config: RunConfig,
  snapshot: RubricSnapshot,
  request: ScoreRequest,
  maxCalls: number,
): Promise<ChunkOutcome> {
  const spent = { calls: 0 }
  try {
    const judgement = await judgeOnRubrics(scorer, config, snapshot, request, maxCalls, spent)
    return { ok: true, judgement, calls: spent.calls }
  } catch (error) {
    if (error instanceof AppError) return { ok: false, error: toWire(error), calls: spent.calls }
    throw error
  }
}

/**
 * One judgement of a rollout on a rubric snapshot with the given scorer, in at most `maxCalls` attempts (the scorer's
 * `max_attempts` cut to what is left of the rollout's budget), counted in `spent`. A model failure is an
 * `llm_unavailable` AppError (503 with Retry-After when it may heal, 502 when the model answered but never validly),
 * or a 429 `judge_budget_exceeded` when the budget, not the scorer's own `max_attempts`, stopped the retries.
 * @example const judgement = await judgeOnRubrics(models.forRole('scorer'), run.config, snapshot, request, 8, spent)
 */
async function judgeOnRubrics(
  scorer: RoleModel,
  config: RunConfig,
  snapshot: RubricSnapshot,
  request: ScoreRequest,
  maxCalls: number,
  spent: { calls: number },
): Promise<Judgement> {
  const { settings, model } = scorer
  const input = scorerInputOf(config, snapshot.rubrics, request, config.reasons)
  // Verdicts: one call per criterion, each retried within the scorer's max_attempts, all within the budget.
  const verdicts = byVerdicts(input)
  const firstCalls = verdicts ? snapshot.rubrics.length : 1
  if (firstCalls > maxCalls) throw budgetError(verdictBudgetRefusal(config.budgets, firstCalls, maxCalls))
  const maxAttempts = verdicts ? settings.max_attempts : Math.min(settings.max_attempts, maxCalls)
  let attempts = 1
  spent.calls = firstCalls
  try {
    return await judgeRollout(
      model,
      input,
      {
        maxAttempts,
        maxDelayMs: Math.min(8_000, settings.timeout_ms),
        onRetry: () => {
          attempts++
          spent.calls++
        },
      },
      maxCalls,
    )
  } catch (error) {
    if (!(error instanceof LlmError)) throw error
    if (error.kind === 'context_length')
      throw contextLengthExceeded('scoring', error.message, error.details.contextLimit)
    const budgetSpent = verdicts
      ? spent.calls >= maxCalls
      : attempts >= maxAttempts && maxAttempts < settings.max_attempts
    if (error.retryable && budgetSpent) {
      const why = `without a valid judgement (last failure: ${error.kind}: ${error.message})`
      throw budgetError(judgeBudgetRefusal(config.budgets, config.budgets.judge_calls_per_rollout, why))
    }
    // A refused request (bad key, unknown model) will not heal on retry: no Retry-After for it.
    const transient = error.transient
    throw new AppError(
      'llm_unavailable',
      `the scoring model failed after ${attempts} attempt${attempts === 1 ? '' : 's'}: ${error.message}`,
      {
        status: transient ? 503 : 502,
        details: { failure: error.kind, attempts },
        ...(transient ? { retryAfterSeconds: error.retryAfterSeconds ?? 5 } : {}),
      },
    )
  }
}

/**
 * @example toWire(new AppError('llm_unavailable', 'down', { retryAfterSeconds: 5 }))
 */
function toWire(error: AppError): WireError {
  return {
    code: error.code,
    message: error.message,
    status: error.status,
    ...(error.details === undefined ? {} : { details: error.details }),
    ...(error.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: error.retryAfterSeconds }),
  }
}
