import { budgetError, judgeBudgetRefusal } from '../../src/budgets/index.ts'
import { groupBy } from '../../src/collections/index.ts'
import { AppError } from '../../src/errors/index.ts'
import { byVerdicts, type Judgement } from '../../src/agents/scorer/index.ts'
import type { ScoreRequest } from '../../src/schemas/rollout.ts'
import type { RubricSnapshot } from '../../src/schemas/rubric.ts'
import type { ScoreResult } from '../../src/schemas/score.ts'
import { judgementCache, rubricCache } from './caches.ts'
import { judgeUnits, MAX_ROLLOUTS_PER_BATCH, type JudgingScope } from './fan-out.ts'
import { judgeRelatively, type RelativeScoring } from './relative.ts'

/** A request's scoring: its run and scorer, where its LLM calls are counted, and how groups are judged. */
export interface ScoreContext extends JudgingScope {
  /** Set when the run judges groups relatively and the request carries groups (see `judgeRelatively`). */
  relative?: RelativeScoring
}

/** One item's outcome in a batch: its result, or the error that kept it from being scored. */
export type ItemOutcome = { ok: true; result: ScoreResult } | { ok: false; error: AppError }

/** What the judge step reads of an item of `scoreRollouts`, and what it sets. */
export interface JudgedItem {
  request: ScoreRequest
  address: { instanceId: string }
  /** Its content's judgement key (`judgementKey`): identical content is judged once. */
  key: string
  /** The rubrics its shard says its step is scored on, when they differ from the isolate's copy. */
  snapshot?: RubricSnapshot
  judged?: { version: number; judgement: Judgement; cached: boolean }
  outcome?: ItemOutcome
  /** LLM calls this request has spent judging it so far: at most the run's `budgets.judge_calls_per_rollout`. */
  judgeCalls?: number
}

/** An item to judge and the rubrics it is judged on. */
type Pending = { item: JudgedItem; snapshot: RubricSnapshot }

/**
 * The judge step of `scoreRollouts`: judges what the isolate has not judged before, each distinct content once (the
 * first copy pays for it), on the rubrics its shard named (else the isolate's copy); groups listwise first when the
 * run judges relatively, the rest one by one through `judgeUnits` (here, or handed out). Sets each item's `judged`,
 * or its `outcome` when it cannot be judged; every call is charged to each copy it judged (`judgeCalls`), and a copy
 * whose budget is spent is refused (429 `judge_budget_exceeded`) rather than judged again.
 * @example await judgeItems(ctx, pending)
 */
export async function judgeItems(ctx: ScoreContext, items: readonly JudgedItem[]): Promise<void> {
  const { run } = ctx
  const toJudge: Pending[] = []
  for (const item of items) {
    const snapshot = item.snapshot ?? rubricCache.get(run.id, item.address.instanceId)
    if (!snapshot) {
      item.outcome = {
        ok: false,
        error: new AppError('internal', 'no rubrics for the instance after the ledger lookup'),
      }
      continue
    }
    // Relative judging caches per group (judgeRelatively): a pointwise judgement of the same response is not reused.
    const cached = ctx.relative
      ? undefined
      : judgementCache.get(run.id, item.address.instanceId, snapshot.version, item.key)
    if (cached) item.judged = { version: snapshot.version, judgement: cached, cached: true }
    else toJudge.push({ item, snapshot })
  }
  let groups = [
    ...groupBy(
      toJudge,
      ({ item, snapshot }) => `${item.address.instanceId}\u0000${snapshot.version}\u0000${item.key}`,
    ).values(),
  ]
  if (ctx.relative) groups = await judgeGroupsRelatively(ctx, groups)
  groups = groups.filter((same) => withinBudget(ctx, same))
  if (tooManyFirstCalls(ctx, groups)) return
  const outcomes = await judgeUnits(
    ctx,
    groups.map((same) => unitOf(ctx, same)),
  )
  groups.forEach((same, index) => {
    const outcome = outcomes[index]!
    const { item, snapshot } = same[0]!
    if (outcome.ok) judgementCache.set(run.id, item.address.instanceId, snapshot.version, item.key, outcome.judgement)
    const spent = spentOn(same) + outcome.calls
    same.forEach(({ item: copy }, position) => {
      copy.judgeCalls = spent
      if (outcome.ok) copy.judged = { version: snapshot.version, judgement: outcome.judgement, cached: position > 0 }
      else copy.outcome = { ok: false, error: outcome.error }
    })
  })
}

/**
 * First LLM calls one request may make: a full batch of one-call judgements, {@link MAX_ROLLOUTS_PER_BATCH}, spread
 * over the handed-out chunks within each invocation's 1,000 subrequests. Verdicts (a call per criterion) reach it with
 * fewer rollouts.
 */
const MAX_FIRST_CALLS = MAX_ROLLOUTS_PER_BATCH

/**
 * Whether judging `groups` would make more than {@link MAX_FIRST_CALLS} first calls; if so, every item to judge is
 * answered 413 `payload_too_large` before any call (nothing of the request is recorded yet).
 */
function tooManyFirstCalls(ctx: ScoreContext, groups: readonly Pending[][]): boolean {
  const { config } = ctx.run
  const calls = groups.reduce((sum, same) => {
    const { item, snapshot } = same[0]!
    const verdicts = byVerdicts({ judging: config.judging, reasons: config.reasons, rollout: item.request.rollout })
    return sum + (verdicts ? snapshot.rubrics.length : 1)
  }, 0)
  if (calls <= MAX_FIRST_CALLS) return false
  const error = new AppError(
    'payload_too_large',
    `judging: verdicts asks each criterion in its own call: these rollouts need ${calls} calls, at most ` +
      `${MAX_FIRST_CALLS} per request; send fewer rollouts per request`,
    { details: { limit: MAX_FIRST_CALLS, calls } },
  )
  for (const same of groups) for (const { item } of same) item.outcome = { ok: false, error }
  return true
}

/** The most LLM calls this request has spent on any copy of one content: what its next judgement is charged from. */
function spentOn(same: readonly Pending[]): number {
  return Math.max(...same.map(({ item }) => item.judgeCalls ?? 0))
}

/** Whether the copies of one content have a call left of their budget; when not, each is refused with the 429. */
function withinBudget(ctx: ScoreContext, same: readonly Pending[]): boolean {
  const spent = spentOn(same)
  if (spent < ctx.run.config.budgets.judge_calls_per_rollout) return true
  const why = 'before a judgement it could be recorded with (its rubrics moved under it, or its group call failed)'
  const error = budgetError(judgeBudgetRefusal(ctx.run.config.budgets, spent, why))
  for (const { item } of same) item.outcome = { ok: false, error }
  return false
}

/**
 * Judges the distinct responses listwise, per prompt, and hands their judgements to every copy; answers with the
 * groups still to judge pointwise (single responses, and groups whose relative call failed).
 */
async function judgeGroupsRelatively(ctx: ScoreContext, groups: Pending[][]): Promise<Pending[][]> {
  const units = groups.map((same) => ({ ...unitOf(ctx, same), key: same[0]!.item.key, calls: spentOn(same) }))
  const judged = await judgeRelatively(ctx.scorer, ctx.run, units, ctx.relative!)
  return groups.filter((same, index) => {
    // A group's call (and its retries) is charged to every response it judged, fallen back or not.
    for (const { item } of same) item.judgeCalls = units[index]!.calls
    const outcome = judged.get(units[index]!)
    if (!outcome) return true
    for (const [position, { item }] of same.entries())
      item.judged = {
        version: units[index]!.snapshot.version,
        judgement: outcome.judgement,
        cached: outcome.cached || position > 0,
      }
    return false
  })
}

/** The judgement to make for the copies of one content, with what is left of their budget. */
function unitOf(ctx: ScoreContext, same: readonly Pending[]) {
  const { item, snapshot } = same[0]!
  const maxCalls = ctx.run.config.budgets.judge_calls_per_rollout - spentOn(same)
  return { instanceId: item.address.instanceId, snapshot, request: item.request, maxCalls }
}
