/**
 * The refusals of a run's budgets (`RunConfig.budgets`): what one run token can make the server spend, whatever it
 * sends. Each is a 429 whose code names the budget and whose `details.budget` names its config key; the Durable Objects
 * that enforce two of them hand a refusal over as plain data (`BudgetRefusal`), the Worker makes it the error.
 */
import { AppError } from '../errors/index.ts'
import type { RunBudgets } from '../schemas/run-config.ts'

/** A budget refusal as it crosses a Durable Object's RPC boundary: plain data, made an `AppError` by `budgetError`. */
export interface BudgetRefusal {
  code:
    | 'instance_budget_exceeded'
    | 'update_budget_exceeded'
    | 'judge_budget_exceeded'
    | 'memory_search_budget_exceeded'
  /** The config key of the budget, e.g. `budgets.instances_per_step`. */
  budget: `budgets.${keyof RunBudgets}`
  limit: number
  message: string
  /** What else the caller may act on (the window, the step, the calls spent). */
  details?: Record<string, number | string>
  /** Where a window applies: when one more fits. */
  retryAfterSeconds?: number
}

/**
 * A rollout of an instance new to a step that already holds `budgets.instances_per_step` instances.
 * @example instanceBudgetRefusal(config.budgets, 3).code // 'instance_budget_exceeded'
 */
export function instanceBudgetRefusal(budgets: RunBudgets, step: number): BudgetRefusal {
  const limit = budgets.instances_per_step
  return {
    code: 'instance_budget_exceeded',
    budget: 'budgets.instances_per_step',
    limit,
    message:
      `step ${step} already holds ${limit} instances, this run's budgets.instances_per_step: a rollout of another ` +
      "instance is refused until the step closes, while rollouts of its instances are still taken (the run's admin " +
      'can raise budgets.instances_per_step)',
    details: { step },
  }
}

/**
 * A `/complete` that would start one step update more than `budgets.updates_per_window` within the window.
 * @example updateBudgetRefusal(config.budgets, 1200).retryAfterSeconds // 1200
 */
export function updateBudgetRefusal(budgets: RunBudgets, retryAfterSeconds: number): BudgetRefusal {
  const limit = budgets.updates_per_window
  const window = budgets.update_window_s
  return {
    code: 'update_budget_exceeded',
    budget: 'budgets.updates_per_window',
    limit,
    message:
      `this run has started ${limit} step updates in the last ${window} s, its budgets.updates_per_window: the step ` +
      `stays open and keeps its rollouts; call /complete again in ${retryAfterSeconds} s (the run's admin can raise ` +
      'budgets.updates_per_window)',
    details: { window_s: window },
    retryAfterSeconds,
  }
}

/**
 * A rollout whose judgement spent `budgets.judge_calls_per_rollout` LLM calls in one request without a valid reply.
 * @example judgeBudgetRefusal(config.budgets, 8, 'invalid_reply: scorer gave no grade for rubric "a1"')
 */
export function judgeBudgetRefusal(budgets: RunBudgets, calls: number, failure: string): BudgetRefusal {
  const limit = budgets.judge_calls_per_rollout
  return {
    code: 'judge_budget_exceeded',
    budget: 'budgets.judge_calls_per_rollout',
    limit,
    message:
      `judging the rollout spent ${calls} LLM calls, this run's budgets.judge_calls_per_rollout, without a valid ` +
      `judgement (last failure: ${failure}); it was not scored: send it again, or have the run's admin raise ` +
      'budgets.judge_calls_per_rollout',
    details: { calls },
  }
}

/**
 * A rollout judged by verdicts (`judging: "verdicts"`, one call per criterion) whose rubric has more criteria than the
 * calls `budgets.judge_calls_per_rollout` leaves it: refused before any call.
 * @example verdictBudgetRefusal(config.budgets, 9, 8).details // { criteria: 9, calls: 0 }
 */
export function verdictBudgetRefusal(budgets: RunBudgets, criteria: number, left: number): BudgetRefusal {
  const limit = budgets.judge_calls_per_rollout
  return {
    code: 'judge_budget_exceeded',
    budget: 'budgets.judge_calls_per_rollout',
    limit,
    message:
      `judging by verdicts asks each of the rubric's ${criteria} criteria in its own call, and ${left} of this run's ` +
      `budgets.judge_calls_per_rollout (${limit}) are left for the rollout; it was not judged: have the run's admin ` +
      'raise budgets.judge_calls_per_rollout above the number of criteria',
    details: { criteria, calls: 0 },
  }
}

/**
 * A memory search (an embedding of its query) past `budgets.memory_searches_per_hour` in the current clock hour.
 * @example memorySearchBudgetRefusal(config.budgets, 1200).retryAfterSeconds // 1200
 */
export function memorySearchBudgetRefusal(budgets: RunBudgets, retryAfterSeconds: number): BudgetRefusal {
  const limit = budgets.memory_searches_per_hour
  return {
    code: 'memory_search_budget_exceeded',
    budget: 'budgets.memory_searches_per_hour',
    limit,
    message:
      `this run has made ${limit} memory searches this hour, its budgets.memory_searches_per_hour: each embeds its ` +
      `query, so the next one waits ${retryAfterSeconds} s (a query searched lately, and listing memory without q, ` +
      "cost nothing and still answer; the run's admin can raise budgets.memory_searches_per_hour)",
    retryAfterSeconds,
  }
}

/**
 * The 429 a refusal is: its code, its message, `details.budget` naming the config key, and Retry-After where a window
 * applies.
 * @example throw budgetError(reply.refused)
 */
export function budgetError(refusal: BudgetRefusal): AppError {
  return new AppError(refusal.code, refusal.message, {
    details: { budget: refusal.budget, limit: refusal.limit, ...refusal.details },
    ...(refusal.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: refusal.retryAfterSeconds }),
  })
}
