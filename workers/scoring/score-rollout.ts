import { injectionTactics } from '../../src/analysis/index.ts'
import { judgeRollout, judgementKey, type Judgement } from '../../src/agents/scorer/index.ts'
import { AppError } from '../../src/errors/index.ts'
import { instanceIdForInput } from '../../src/hash/index.ts'
import { llmStats, LlmError, pLimit, type LlmCallRecord } from '../../src/llm/index.ts'
import type { ScoreRequest } from '../../src/schemas/rollout.ts'
import { ledgerShardsOf, type RunConfig } from '../../src/schemas/run-config.ts'
import type { RubricSnapshot } from '../../src/schemas/rubric.ts'
import type { ScoreResult } from '../../src/schemas/score.ts'
import type { LedgerEntry, RecordReply, ShardAddress, Submission } from '../../durable-objects/contracts.ts'
import { ledgerShardOf } from '../../durable-objects/names.ts'
import type { Env } from '../env.ts'
import { objects } from '../objects/call.ts'
import { judgementCache, rubricCache } from './caches.ts'
import type { RoleModel } from './models.ts'
import { groupBy } from '../../src/collections/index.ts'
import { fromWire, handOut, judgeOutcome, type ChunkOutcome } from './fan-out.ts'
import { judgeService } from './judge-service.ts'
import { judgeRelatively, type RelativeScoring } from './relative.ts'

/** Items of one request judged at once; LLM calls are capped separately by the run's `max_concurrent_llm_calls`. */
const ITEM_CONCURRENCY = 16
/**
 * Times a rollout is judged again because its step is scored on other rubrics than the ones it was judged on: once
 * covers a version change during the request; more means the rubrics keep moving under it.
 */
const REJUDGE_ROUNDS = 2

export interface ScoreContext {
  env: Env
  run: { id: string; config: RunConfig }
  scorer: RoleModel
  /**
   * Every LLM call the request made (`requestModels().calls`), chunks handed out included: summed per step for the
   * dashboard.
   */
  calls: LlmCallRecord[]
  requestId: string
  /** Set when the run judges groups relatively and the request carries groups (see `judgeRelatively`). */
  relative?: RelativeScoring
}

/** One item's outcome in a batch: its result, or the error that kept it from being scored. */
export type ItemOutcome = { ok: true; result: ScoreResult } | { ok: false; error: AppError }

/** A request on its way: where it goes and what it needs. */
interface Item {
  index: number
  request: ScoreRequest
  address: ShardAddress
  key: string
  tactics: string[]
  outcome?: ItemOutcome
  judged?: { version: number; judgement: Judgement; cached: boolean }
  /** The rubrics its shard says its step is scored on, when they differ from the isolate's copy. */
  snapshot?: RubricSnapshot
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
 * Scores many rollouts with one ledger call per shard per phase, not per item: a lookup (so a retried batch pays no
 * model call for what is already recorded, and the isolate learns the rubrics), the judgements, then the record.
 * Results come back in order; one item's failure does not fail the others.
 * @example const outcomes = await scoreRollouts(ctx, requests, { lookupFirst: true })
 */
export async function scoreRollouts(
  ctx: ScoreContext,
  requests: readonly ScoreRequest[],
  options: { lookupFirst: boolean },
): Promise<ItemOutcome[]> {
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
        ),
        tactics: injectionTactics(request.rollout.output),
      }
    }),
  )
  const lookups = byShard(
    items.filter(
      (item) =>
        options.lookupFirst ||
        !rubricCache.current(run.id, item.address.instanceId, item.request.metadata.current_step),
    ),
  )
  await Promise.all([...lookups.values()].map((group) => recordOnShard(ctx, group, false)))
  // Each LLM call of the request reaches the ledger once: with the first record after it was made.
  let reported = 0
  for (let round = 0; round <= REJUDGE_ROUNDS; round++) {
    const pending = items.filter((item) => !item.outcome)
    if (pending.length === 0) break
    await judgeItems(ctx, pending)
    const groups = [...byShard(pending.filter((item) => !item.outcome)).values()]
    if (groups.length === 0) break
    const stats = llmStats(ctx.calls.slice(reported))
    reported = ctx.calls.length
    await Promise.all(groups.map((group, position) => recordOnShard(ctx, group, true, position === 0 ? stats : [])))
  }
  if (ctx.calls.length > reported) await sendStatsOnly(ctx, items[0]!.address, llmStats(ctx.calls.slice(reported)))
  // Every item is recorded or refused by now, except one whose step's rubrics kept changing under it.
  const outcomes = items.map(
    (item): ItemOutcome =>
      item.outcome ?? {
        ok: false,
        error: new AppError('overloaded', 'the rubrics changed while the rollout was judged; retry after the delay', {
          retryAfterSeconds: 1,
        }),
      },
  )
  if (run.config.mode !== 'sync') return outcomes
  return Promise.all(
    outcomes.map((outcome, index) => (outcome.ok ? settleSync(ctx, items[index]!, outcome.result) : outcome)),
  )
}

/** One ledger call for items of one shard: a lookup (no judgements) or the record of their judgements. */
async function recordOnShard(
  ctx: ScoreContext,
  group: Item[],
  withJudgements: boolean,
  stats: ReturnType<typeof llmStats> = [],
): Promise<void> {
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
    else {
      delete item.judged
      if (reply.snapshot) item.snapshot = reply.snapshot
    }
  })
}

async function sendStatsOnly(
  ctx: ScoreContext,
  address: ShardAddress,
  stats: ReturnType<typeof llmStats>,
): Promise<void> {
  const known = rubricCache.get(ctx.run.id, address.instanceId)?.version ?? 0
  try {
    await objects.ledger(ctx.env, address, (ledger) => ledger.record([], known))
  } catch (error) {
    console.error(`[${ctx.requestId}] could not hand the scorer's LLM calls to the ledger`, error)
  }
}

/**
 * Judges what the isolate has not judged before, each distinct content once: in this invocation when there is little,
 * else in chunks handed to other invocations of this Worker (`JUDGE`), each with its own 6 connections, so a batch
 * of 1,024 with the scorer's default concurrency (4) takes about 1,024 ÷ 120 judge latencies instead of 1,024 ÷ 4.
 */
async function judgeItems(ctx: ScoreContext, items: readonly Item[]): Promise<void> {
  const { run } = ctx
  const toJudge: { item: Item; snapshot: RubricSnapshot }[] = []
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
  // Identical content in one batch is judged once: the first copy pays for it.
  let groups = [
    ...groupBy(
      toJudge,
      ({ item, snapshot }) => `${item.address.instanceId}\u0000${snapshot.version}\u0000${item.key}`,
    ).values(),
  ]
  type Group = (typeof groups)[number]
  const first = (same: Group) => same[0]!
  const judgeHere = async (part: readonly Group[]) => {
    const limit = pLimit(ITEM_CONCURRENCY)
    return Promise.all(
      part.map((same) =>
        limit(() =>
          judgeOutcome(judgeOnRubrics, ctx.scorer, run.config, first(same).snapshot, first(same).item.request),
        ),
      ),
    )
  }
  if (ctx.relative) groups = await judgeGroupsRelatively(ctx, groups)
  const judge = judgeService(ctx.env)
  const judgeAway =
    judge &&
    (async (part: Group[]) => {
      const reply: { outcomes: ChunkOutcome[]; calls: LlmCallRecord[] } = await judge.judge({
        runId: run.id,
        config: run.config,
        requestId: ctx.requestId,
        snapshots: Object.fromEntries(part.map((same) => [first(same).item.address.instanceId, first(same).snapshot])),
        items: part.map((same) => ({
          instanceId: first(same).item.address.instanceId,
          request: first(same).item.request,
        })),
      })
      ctx.calls.push(...reply.calls)
      return reply.outcomes
    })
  const outcomes = await handOut(groups, judgeHere, judgeAway, ctx.requestId)
  groups.forEach((same, index) => {
    const outcome = outcomes[index]!
    const { item, snapshot } = first(same)
    if (outcome.ok) judgementCache.set(run.id, item.address.instanceId, snapshot.version, item.key, outcome.judgement)
    same.forEach(({ item: copy }, position) => {
      if (outcome.ok) copy.judged = { version: snapshot.version, judgement: outcome.judgement, cached: position > 0 }
      else copy.outcome = { ok: false, error: fromWire(outcome.error) }
    })
  })
}

/**
 * Judges the distinct responses listwise, per prompt, and hands their judgements to every copy; answers with the
 * groups still to judge pointwise (single responses, and groups whose relative call failed).
 */
async function judgeGroupsRelatively<G extends { item: Item; snapshot: RubricSnapshot }[]>(
  ctx: ScoreContext,
  groups: G[],
): Promise<G[]> {
  const units = groups.map((same) => ({
    instanceId: same[0]!.item.address.instanceId,
    snapshot: same[0]!.snapshot,
    request: same[0]!.item.request,
    key: same[0]!.item.key,
  }))
  const judged = await judgeRelatively(ctx.scorer, ctx.run, units, ctx.relative!)
  return groups.filter((same, index) => {
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

/**
 * Sync mode: waits for the step's update, then makes the rollout's final score the one on the rubrics that update
 * left, in the ledger first (`LedgerShard.settle`: the first settle stands), and answers what the ledger holds, so a
 * retried request, the step's tallies and the archive say what this answer says.
 */
async function settleSync(ctx: ScoreContext, item: Item, result: ScoreResult): Promise<ItemOutcome> {
  const { env, run } = ctx
  const deadline = Date.now() + run.config.max_wait_s * 1_000
  const { address } = item
  // A reset of the shard drops its waiters: the call is made again, on a fresh object, for what is left of the time.
  const released = await objects.ledger(env, address, (ledger) =>
    ledger.awaitUpdate(result.step, Math.max(0, deadline - Date.now())),
  )
  if (!released) return { ok: true, result: { ...result, update_pending: true } }
  rubricCache.offer(run.id, address.instanceId, released, item.request.metadata.current_step)
  if (released.version === result.rubric_version) return { ok: true, result }
  try {
    const cached = judgementCache.get(run.id, address.instanceId, released.version, item.key)
    const judgement = cached ?? (await judgeOnRubrics(ctx.scorer, run.config, released, item.request))
    if (!cached) judgementCache.set(run.id, address.instanceId, released.version, item.key, judgement)
    const settled = await objects.ledger(env, address, (ledger) =>
      ledger.settle(result.step, item.request.rollout.id, {
        rubricVersion: released.version,
        score: judgement.score,
        criteria: judgement.criteria,
        cached: Boolean(cached),
        judgeModel: ctx.scorer.label,
      }),
    )
    if (!settled) return { ok: true, result }
    return { ok: true, result: toResult(ctx, address.instanceId, settled, result.duplicate) }
  } catch (error) {
    if (error instanceof AppError) return { ok: false, error }
    throw error
  }
}

/**
 * One judgement of a rollout on a rubric snapshot with the given scorer; a model failure is an `llm_unavailable`
 * AppError (503 with Retry-After when it may heal, 502 when the model answered but never validly).
 * @example const judgement = await judgeOnRubrics(models.forRole('scorer'), run.config, snapshot, request)
 */
export async function judgeOnRubrics(
  scorer: RoleModel,
  config: RunConfig,
  snapshot: RubricSnapshot,
  request: ScoreRequest,
): Promise<Judgement> {
  const { settings, model } = scorer
  let attempts = 1
  try {
    return await judgeRollout(
      model,
      {
        rubrics: snapshot.rubrics,
        rollout: request.rollout,
        metadata: request.metadata,
        gradeMax: config.grade_max,
        locale: config.locale,
        prompts: config.prompts,
        reasons: config.reasons,
      },
      {
        maxAttempts: settings.max_attempts,
        maxDelayMs: Math.min(8_000, settings.timeout_ms),
        onRetry: () => void attempts++,
      },
    )
  } catch (error) {
    if (!(error instanceof LlmError)) throw error
    // A refused request (bad key, unknown model) will not heal on retry: no Retry-After for it.
    const transient = error.kind !== 'invalid_reply' && error.kind !== 'bad_request'
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
