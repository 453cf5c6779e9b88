import { injectionTactics } from '../../src/analysis/index.ts'
import { budgetError, judgeBudgetRefusal } from '../../src/budgets/index.ts'
import { judgementKey } from '../../src/agents/scorer/index.ts'
import { groupBy } from '../../src/collections/index.ts'
import { AppError } from '../../src/errors/index.ts'
import { instanceIdForInput } from '../../src/hash/index.ts'
import { STORED_ROLLOUT_MAX_BYTES, type ScoreRequest, storedRolloutBytes } from '../../src/schemas/rollout.ts'
import { ledgerShardsOf, type RunConfig } from '../../src/schemas/run-config.ts'
import type { RubricSnapshot } from '../../src/schemas/rubric.ts'
import type { ScoreResult } from '../../src/schemas/score.ts'
import type {
  Judged,
  LedgerEntry,
  RecordReply,
  ShardAddress,
  ShardAnswer,
  Submission,
} from '../../durable-objects/contracts.ts'
import { ledgerShardOf } from '../../durable-objects/names.ts'
import { objects } from '../objects/call.ts'
import { judgementCache, rubricCache } from './caches.ts'
import { judgeItems, type ItemOutcome, type JudgedItem, type ScoreContext } from './judge.ts'
import { judgeUnits } from './fan-out.ts'

export type { ItemOutcome, ScoreContext } from './judge.ts'

/**
 * Times a rollout is judged again because its step is scored on other rubrics than the ones it was judged on: once
 * covers a version change during the request; more means the rubrics keep moving under it.
 */
const REJUDGE_ROUNDS = 2

/**
 * A request on its way: where it goes and what it needs (set by `resolveItems`), its judgement (`judgeItems`), and its
 * outcome (`recordItems`, or a step that refused it).
 */
interface Item extends JudgedItem {
  index: number
  address: ShardAddress
  tactics: string[]
}

/**
 * The `/score` flow for one rollout: judge it on the isolate's copy of its instance's rubrics (a cached judgement of
 * identical content needs no model call), then one call to its ledger shard records it once per (step, rollout id)
 * and says whether the rubrics moved on. Only an isolate without a copy asks the shard first. In sync mode the
 * answer waits for the step's update and is re-judged on newer rubrics.
 * @example const result = await scoreRollout(ctx, { rollout, metadata })
 */
export async function scoreRollout(ctx: ScoreContext, request: ScoreRequest): Promise<ScoreResult> {
  const [outcome] = await scoreRollouts(ctx, [request], { lookupFirst: false })
  if (!outcome!.ok) throw outcome!.error
  return outcome!.result
}

/**
 * Scores many rollouts with one ledger call per shard per phase, not per item, in four steps: resolve (where each
 * goes; a lookup so a retried batch pays no model call for what is already recorded, and the isolate learns the
 * rubrics), judge (here or handed out), record, answer. Results come back in order; one item's failure does not fail
 * the others.
 * @example const outcomes = await scoreRollouts(ctx, requests, { lookupFirst: true })
 */
export async function scoreRollouts(
  ctx: ScoreContext,
  requests: readonly ScoreRequest[],
  options: { lookupFirst: boolean },
): Promise<ItemOutcome[]> {
  const arrivedAt = Date.now()
  const items = await resolveItems(ctx, requests, options)
  for (let round = 0; round <= REJUDGE_ROUNDS; round++) {
    const pending = items.filter((item) => !item.outcome)
    if (pending.length === 0) break
    await judgeItems(ctx, pending)
    // An item the judge step could not judge has its outcome already: only the judged are recorded.
    const judged = pending.filter((item) => !item.outcome)
    await recordItems(ctx, judged, arrivedAt)
  }
  return answer(ctx, items)
}

/**
 * Where each request goes (its instance, ledger shard, judgement key and injection tactics), and, for the items whose
 * rubrics the isolate does not hold for their trainer step (every item with `lookupFirst`), one lookup per shard:
 * what is already recorded is answered from it, and the reply's rubrics are what the rest are judged on.
 */
async function resolveItems(
  ctx: ScoreContext,
  requests: readonly ScoreRequest[],
  options: { lookupFirst: boolean },
): Promise<Item[]> {
  const { run } = ctx
  const shards = ledgerShardsOf(run.config)
  const items: Item[] = await Promise.all(
    requests.map(async (request, index) => {
      const instanceId = await resolveInstanceId(run.config, request)
      return {
        index,
        request,
        address: { runId: run.id, instanceId, shard: ledgerShardOf(request.rollout.id, shards) },
        key: await judgementKey(
          ctx.scorer.signature,
          run.config.locale,
          run.config.grade_max,
          request.rollout,
          request.metadata,
          run.config.prompts,
          run.config.judging,
        ),
        tactics: injectionTactics(request.rollout.output),
      }
    }),
  )
  for (const item of items) {
    const tooLarge = tooLargeToStore(item.request)
    if (tooLarge) item.outcome = { ok: false, error: tooLarge }
  }
  const lookups = byShard(
    items.filter(
      (item) =>
        !item.outcome &&
        (options.lookupFirst ||
          !rubricCache.current(run.id, item.address.instanceId, item.request.metadata.current_step)),
    ),
  )
  await Promise.all([...lookups.values()].map((group) => recordOnShard(ctx, group)))
  return items
}

/**
 * Records the judged items, one ledger call per shard: each is recorded (or found recorded) and gets its outcome, or
 * is handed the rubrics its step is scored on, to be judged again.
 */
async function recordItems(ctx: ScoreContext, items: readonly Item[], arrivedAt: number): Promise<void> {
  await Promise.all([...byShard(items).values()].map((group) => recordOnShard(ctx, group, arrivedAt)))
}

/**
 * One ledger call for items of one shard: a lookup (no `arrivedAt`: no judgements) or the record of their judgements,
 * each with how long it took since the request arrived at `arrivedAt`.
 */
async function recordOnShard(ctx: ScoreContext, group: Item[], arrivedAt?: number): Promise<void> {
  const withJudgements = arrivedAt !== undefined
  const { env, run } = ctx
  const address = group[0]!.address
  const known = rubricCache.get(run.id, address.instanceId)?.version ?? 0
  const submissions: Submission[] = group.map((item) => ({
    rollout: item.request.rollout,
    metadata: item.request.metadata,
    ...(item.tactics.length ? { tactics: item.tactics } : {}),
    ...(withJudgements && item.judged
      ? {
          judged: {
            rubricVersion: item.judged.version,
            score: item.judged.judgement.score,
            criteria: item.judged.judgement.criteria,
            cached: item.judged.cached,
            judgeModel: ctx.scorer.label,
          },
          judgedInMs: Date.now() - arrivedAt,
        }
      : {}),
  }))
  let reply: RecordReply
  try {
    reply = await objects.ledger(env, address, (ledger) => ledger.record(submissions, known))
  } catch (error) {
    const refused =
      error instanceof AppError ? error : new AppError('internal', 'the ledger could not record the rollout')
    if (!(error instanceof AppError)) console.error(`[${ctx.requestId}] ledger call failed`, error)
    for (const item of group) item.outcome = { ok: false, error: refused }
    return
  }
  rubricCache.offer(
    run.id,
    address.instanceId,
    reply.snapshot,
    Math.max(...group.map((item) => item.request.metadata.current_step)),
    reply.pinned,
  )
  reply.answers.forEach((answer, position) => {
    const item = group[position]!
    if (answer.kind === 'recorded')
      item.outcome = { ok: true, result: toResult(ctx, item.address.instanceId, answer.entry, answer.duplicate) }
    else if (answer.kind === 'refused') item.outcome = { ok: false, error: budgetError(answer.refusal) }
    else if (answer.kind === 'failed') item.outcome = { ok: false, error: failedError(answer) }
    else {
      delete item.judged
      if (reply.snapshot) item.snapshot = reply.snapshot
    }
  })
}

/**
 * The answers, in order: every item is recorded or refused by now, except one whose step's rubrics kept changing
 * under it (retry later). In sync mode each recorded one waits for its step's update first (`settleSync`).
 */
async function answer(ctx: ScoreContext, items: readonly Item[]): Promise<ItemOutcome[]> {
  const outcomes = items.map(
    (item): ItemOutcome =>
      item.outcome ?? {
        ok: false,
        error: new AppError('overloaded', 'the rubrics changed while the rollout was judged; retry after the delay', {
          retryAfterSeconds: 1,
        }),
      },
  )
  if (ctx.run.config.mode !== 'sync') return outcomes
  return Promise.all(
    outcomes.map(async (outcome, index) => {
      if (!outcome.ok) return outcome
      try {
        return await settleSync(ctx, items[index]!, outcome.result)
      } catch (error) {
        if (error instanceof AppError) return { ok: false, error }
        throw error
      }
    }),
  )
}

/**
 * Sync mode: waits for the step's update, then makes the rollout's final score the one on the rubrics that update
 * left, in the ledger first (`LedgerShard.settle`: once, for good), and answers what the ledger holds, so a retried
 * request, the step's tallies and the archive say what this answer says. A wait that runs out keeps the first score
 * for good (`finalize`); a retry is never judged again: it answers the row once its first request has made it final.
 */
async function settleSync(ctx: ScoreContext, item: Item, result: ScoreResult): Promise<ItemOutcome> {
  const { env, run } = ctx
  const deadline = Date.now() + run.config.max_wait_s * 1_000
  const { address } = item
  const { step, rollout_id: rolloutId } = result
  const left = () => Math.max(0, deadline - Date.now())
  if (result.duplicate) {
    const final = await objects.ledger(env, address, (ledger) => ledger.awaitFinal(step, rolloutId, left()))
    return { ok: true, result: final ? toResult(ctx, address.instanceId, final, true) : result }
  }
  // A reset of the shard drops its waiters: the call is made again, on a fresh object, for what is left of the time.
  const released = await objects.ledger(env, address, (ledger) => ledger.awaitUpdate(step, left()))
  if (!released) {
    await objects.ledger(env, address, (ledger) => ledger.finalize(step, rolloutId))
    return { ok: true, result: { ...result, update_pending: true } }
  }
  rubricCache.offer(run.id, address.instanceId, released, item.request.metadata.current_step)
  if (released.version === result.rubric_version) return { ok: true, result }
  const judged = await judgeOnUpdate(ctx, item, released)
  if (!judged.ok) {
    await objects.ledger(env, address, (ledger) => ledger.finalize(step, rolloutId))
    return judged
  }
  const settled = await objects.ledger(env, address, (ledger) => ledger.settle(step, rolloutId, judged.judged))
  return { ok: true, result: settled ? toResult(ctx, address.instanceId, settled, false) : result }
}

/**
 * A sync rollout's judgement on the rubrics its step's update left: from the judgement cache, else through the judge
 * step's own way of judging (one unit, here) within what is left of the rollout's budget.
 */
async function judgeOnUpdate(
  ctx: ScoreContext,
  item: Item,
  released: RubricSnapshot,
): Promise<{ ok: true; judged: Judged } | { ok: false; error: AppError }> {
  const { run } = ctx
  const { instanceId } = item.address
  const cached = judgementCache.get(run.id, instanceId, released.version, item.key)
  let judgement = cached
  if (!judgement) {
    const spent = item.judgeCalls ?? 0
    const maxCalls = run.config.budgets.judge_calls_per_rollout - spent
    if (maxCalls <= 0) {
      const why = 'before a judgement on the rubrics its step left (sync mode re-scores on them)'
      return { ok: false, error: budgetError(judgeBudgetRefusal(run.config.budgets, spent, why)) }
    }
    const [outcome] = await judgeUnits(ctx, [{ instanceId, snapshot: released, request: item.request, maxCalls }])
    if (!outcome!.ok) return { ok: false, error: outcome!.error }
    judgement = outcome!.judgement
    judgementCache.set(run.id, instanceId, released.version, item.key, judgement)
  }
  const { score, criteria } = judgement
  return {
    ok: true,
    judged: { rubricVersion: released.version, score, criteria, cached: Boolean(cached), judgeModel: ctx.scorer.label },
  }
}

/** A shard's `failed` answer as the error its item gets: an overload says when to retry. */
function failedError(answer: Extract<ShardAnswer, { kind: 'failed' }>): AppError {
  return new AppError(answer.code, answer.message, answer.code === 'overloaded' ? { retryAfterSeconds: 1 } : {})
}

/** A rollout too large to store is refused alone, before anything is judged or recorded. */
function tooLargeToStore(request: ScoreRequest): AppError | undefined {
  const bytes = storedRolloutBytes(request)
  if (bytes <= STORED_ROLLOUT_MAX_BYTES) return undefined
  return new AppError(
    'payload_too_large',
    `the rollout takes ${bytes} bytes as the ledger stores it (JSON, UTF-8, escapes included): at most ` +
      `${STORED_ROLLOUT_MAX_BYTES} fit; send a shorter output, input or supplemental_context`,
    { details: { limit: STORED_ROLLOUT_MAX_BYTES, bytes } },
  )
}

async function resolveInstanceId(config: RunConfig, request: ScoreRequest): Promise<string> {
  if (config.rubrics_mode === 'global') return 'global'
  return request.instance_id ?? instanceIdForInput(request.rollout.input)
}

function byShard(items: readonly Item[]): Map<string, Item[]> {
  return groupBy(items, (item) => `${item.address.instanceId}\u0000${item.address.shard}`)
}

function toResult(ctx: ScoreContext, instanceId: string, entry: LedgerEntry, duplicate: boolean): ScoreResult {
  return {
    score: entry.score,
    rubric_version: entry.rubric_version,
    instance_id: instanceId,
    criteria: entry.criteria,
    request_id: ctx.requestId,
    run_id: ctx.run.id,
    rollout_id: entry.rollout_id,
    step: entry.step,
    grade_max: ctx.run.config.grade_max,
    duplicate,
    cached: entry.cached,
  }
}
