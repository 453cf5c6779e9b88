import { selectForAnalysis, type AnalysisReason, type SelectedRollout } from '../../src/analysis/index.ts'
import { runAnalyzer } from '../../src/agents/analyzer/index.ts'
import { summarizeStep } from '../../src/agents/meta-summarizer/index.ts'
import { runQueryGenerator } from '../../src/agents/query-generator/index.ts'
import { applyRubricUpdate, runUpdater, type RubricDiff } from '../../src/agents/updater/index.ts'
import { LlmError, llmStats, type LlmCallRecord } from '../../src/llm/index.ts'
import { formatMemoriesForPrompt } from '../../src/memory/format-memories.ts'
import { retrieveMemories } from '../../src/memory/retrieval.ts'
import {
  trainingStage,
  type Analysis,
  type AnalysisRecord,
  type BatchSummary,
  type RubricUpdate,
} from '../../src/schemas/agents.ts'
import type { MemoryDocument } from '../../src/schemas/memory.ts'
import type { TrainingMetadata } from '../../src/schemas/rollout.ts'
import { analysisBudgetOf, ledgerShardsOf, type RunConfig } from '../../src/schemas/run-config.ts'
import type { RubricSnapshot } from '../../src/schemas/rubric.ts'
import { criterionHealth, retirements, type CriterionStepHealth, type Retirement } from '../../src/scoring/health.ts'
import type { StepUpdateOutcome, UpdateProgress } from '../../src/schemas/status.ts'
import type { RecordedRollout, RolloutAnalysis, ShardAddress, StepRollout } from '../../durable-objects/contracts.ts'
import { instanceName } from '../../durable-objects/names.ts'
import type { StepUpdateCommit } from '../../durable-objects/rubric-instance/index.ts'
import type { Env } from '../env.ts'
import { embedderFor, memoryFor, vectorIndexFor } from '../memory/backends.ts'
import { MemoryStore, STEP_SUBJECT } from '../memory/store.ts'
import type { StepJob } from '../../durable-objects/contracts.ts'
import { loadRunConfig } from '../../durable-objects/run-config.ts'
import { requestModels } from '../scoring/models.ts'
import { criteriaWithReasons } from './judge-reasons.ts'
import { groupBy } from '../../src/collections/index.ts'
import { recordedRollouts } from './recorded.ts'
import { auditStep } from './audit.ts'
import { objects } from '../objects/call.ts'

/** Characters of a flagged rollout's input and output its analysis document keeps, for the dashboard's hacking view. */
const EXCERPT_CHARS = 800
/** Times an update is planned again when another version landed while it was planned. */
const MAX_REPLANS = 3

/** What a step update worked from, counted for `/rubric_status`. */
type Counts = StepUpdateCommit['counts']

/**
 * A step update's progress before it has read anything: what its job's heartbeat sends until the update moves on.
 * @example const progress = startProgress(); await updateInstanceStep(env, job, { lastAttempt: false, progress })
 */
export function startProgress(): UpdateProgress {
  return { phase: 'reading', analyses: { selected: 0, done: 0, failed: 0 }, at: new Date().toISOString() }
}

/** The update moved on to `phase` (with the analyses it chose, once it has). */
function noteProgress(
  progress: UpdateProgress,
  phase: UpdateProgress['phase'],
  analyses?: Pick<UpdateProgress['analyses'], 'selected' | 'done'>,
): void {
  progress.phase = phase
  if (analyses) Object.assign(progress.analyses, analyses)
}

/**
 * One instance's update for a closed step: read the step's rollouts from its ledger shards → choose the rollouts to
 * analyse within the run's budget (suspicious ones, group extremes, the score range) → analyse them → summarise
 * (chunked) → on update steps, generate queries → retrieve memory → update the adaptive rubrics → commit the new
 * version (compare-and-set) → tell the shards and the coordinator. Every stage is idempotent: a redelivered or
 * retried job skips the analyses already made and repeats no committed work. On the job's last attempt a failure
 * commits "no change" with the error, so the step still completes; so does, at once, a model that answered but never
 * usably (a reply refused or cut after the role's own attempts): a redelivery would ask it the same question.
 * @example await updateInstanceStep(env, job, { lastAttempt: false })
 */
export async function updateInstanceStep(
  env: Env,
  job: StepJob,
  options: { lastAttempt: boolean; progress?: UpdateProgress },
): Promise<StepUpdateOutcome> {
  const progress = options.progress ?? startProgress()
  const config = await loadRunConfig(env.DB, job.runId)
  if (!config) throw new Error(`run "${job.runId}" does not exist`)
  const instance = env.RUBRIC_INSTANCE.getByName(instanceName(job.runId, job.instanceId))
  const earlier = await instance.stepOutcome(job.step)
  if (earlier) return finish(env, config, job, earlier, await instance.snapshot(), [])
  if (job.skip) return skipInstanceStep(env, config, job, job.skip, instance)
  const models = requestModels(env, config)
  const rollouts = await readStep(env, job)
  const health = criterionHealth(rollouts, config.grade_max)
  // Earlier steps matter only for a retirement streak; the cap of `max_active_rubrics` reads this step alone.
  const earlierSteps = Math.max(0, (config.retire_after_steps ?? 1) - 1)
  const pastHealth = earlierSteps > 0 ? await instance.health(earlierSteps, job.step) : []
  const measured = [...groupBy(pastHealth, (row) => row.step).values(), health]
  const counts: Counts = { rollouts: rollouts.length, analysed: 0, failed: 0, reasons: {}, hacking_flags: 0 }
  let commit: StepUpdateCommit | undefined
  let snapshot: RubricSnapshot = await instance.snapshot()
  try {
    const [analyses, audit] = await Promise.all([
      analyseStep(env, config, job, rollouts, models, { ...options, progress }),
      auditStep(env, config, job, rollouts, models),
    ])
    Object.assign(counts, analyses.counts, audit ? { audit } : {})
    for (let plans = 0; ; plans++) {
      const retired = retirements(snapshot.rubrics, measured, retirementPolicy(config))
      const kept = { ...snapshot, rubrics: snapshot.rubrics.filter((rubric) => !isRetired(rubric.id, retired)) }
      const planned = await planUpdate(env, config, job, kept, analyses, counts, models, health, progress)
      const retiring = withRetirements(planned, kept, retired)
      commit = withHealth(capActive(retiring, kept, config, measured), health)
      const result = await instance.commitStepUpdate(job.step, commit)
      if (result.state === 'committed') return finish(env, config, job, result.outcome, result.snapshot, models.calls)
      // Another step's update landed while this one was planned: plan again on the rubrics it left.
      if (plans + 1 >= MAX_REPLANS)
        throw new Error(`step ${job.step}: the rubrics kept changing while the update was planned`)
      snapshot = result.snapshot
    }
  } catch (error) {
    const modelsAnswer = error instanceof LlmError && !error.transient
    if (!options.lastAttempt && !modelsAnswer) throw error
    const result = await instance.commitStepUpdate(
      job.step,
      withHealth(
        noChange(
          snapshot,
          'update failed; the previous rubrics stay in force',
          counts,
          String((error as Error).message ?? error),
        ),
        health,
      ),
    )
    return finish(
      env,
      config,
      job,
      result.state === 'committed' ? result.outcome : unreachable(),
      result.snapshot,
      models.calls,
    )
  }
}

/**
 * A step that closed past `budgets.updates_per_window`: its update commits no change, says which budget skipped it,
 * and makes no LLM call; the shards still learn the step is done (sync waiters answer, its rows age out) and the
 * coordinator counts the instance updated.
 */
async function skipInstanceStep(
  env: Env,
  config: RunConfig,
  job: StepJob,
  skip: NonNullable<StepJob['skip']>,
  instance: ReturnType<Env['RUBRIC_INSTANCE']['getByName']>,
): Promise<StepUpdateOutcome> {
  const snapshot = await instance.snapshot()
  const counts: Counts = { rollouts: skip.rollouts, analysed: 0, failed: 0, reasons: {}, hacking_flags: 0 }
  const result = await instance.commitStepUpdate(job.step, {
    ...noChange(snapshot, `update skipped: ${skip.budget} was spent when the step closed`, counts),
    skipped: skip.budget,
  })
  const outcome = result.state === 'committed' ? result.outcome : unreachable()
  return finish(env, config, job, outcome, result.snapshot, [])
}

/**
 * Reports a step job that exhausted its retries as done with no change, so the step completes.
 * @example await abandonInstanceStep(env, message.body, 'the updater failed 4 times')
 */
export async function abandonInstanceStep(env: Env, job: StepJob, reason: string): Promise<void> {
  const config = await loadRunConfig(env.DB, job.runId)
  if (!config) return
  const instance = env.RUBRIC_INSTANCE.getByName(instanceName(job.runId, job.instanceId))
  const snapshot = await instance.snapshot()
  const counts: Counts = { rollouts: 0, analysed: 0, failed: 0, reasons: {}, hacking_flags: 0 }
  const result = await instance.commitStepUpdate(
    job.step,
    noChange(snapshot, `update abandoned: ${reason}`, counts, reason),
  )
  if (result.state === 'committed') await finish(env, config, job, result.outcome, result.snapshot, [])
}

/** The step's rollouts from each shard that took part, after making sure the shard applied the close. */
async function readStep(env: Env, job: StepJob): Promise<StepRollout[]> {
  const parts = await Promise.all(
    job.shards.map(({ shard }) => {
      const address: ShardAddress = { runId: job.runId, instanceId: job.instanceId, shard }
      return objects.ledger(env, address, (ledger) => ledger.stepRollouts({ step: job.step }))
    }),
  )
  return parts.flat()
}

/**
 * The step's deep analyses: the rollouts `selectForAnalysis` chooses, analysed once each (a retry skips those done),
 * remembered as memory documents, and marked on their ledger rows. An analysis that fails after its own retries is
 * counted as failed, unless every one failed and the job has attempts left: then the job is retried.
 */
async function analyseStep(
  env: Env,
  config: RunConfig,
  job: StepJob,
  rollouts: readonly StepRollout[],
  models: ReturnType<typeof requestModels>,
  options: { lastAttempt: boolean; progress: UpdateProgress },
): Promise<{ records: AnalysisRecord[]; latest?: TrainingMetadata; counts: Omit<Counts, 'rollouts'> }> {
  const selected = selectForAnalysis(rollouts, analysisBudgetOf(config))
  const byId = new Map(rollouts.map((rollout) => [rollout.rollout_id, rollout]))
  const reasons: Partial<Record<AnalysisReason, number>> = {}
  for (const { reasons: why } of selected) for (const reason of why) reasons[reason] = (reasons[reason] ?? 0) + 1
  const todo = selected.filter(({ rollout_id }) => byId.get(rollout_id)!.analysis?.status !== 'done')
  const memory = memoryFor(env, job.runId, { limit: models.limit })
  noteProgress(options.progress, 'analysing', { selected: selected.length, done: selected.length - todo.length })
  const fresh = await analyseRollouts(env, config, job, todo, byId, memory, models, options.progress)
  // A redelivery is worth it only for a failure that may heal (a server down or busy); a model that answered but never
  // usably answers the same again, so the update goes on without those analyses.
  const allFailed = todo.length > 0 && fresh.every((result) => result.analysis.status === 'failed')
  if (allFailed && fresh.some((result) => result.transient) && !options.lastAttempt) {
    throw new Error(`step ${job.step}: all ${todo.length} analyses failed`)
  }
  await recordOnShards(env, job, fresh, byId)
  const outcomes = new Map(
    rollouts.flatMap((rollout) => (rollout.analysis ? [[rollout.rollout_id, rollout.analysis] as const] : [])),
  )
  for (const result of fresh) outcomes.set(result.rollout_id, result.analysis)
  const done = selected.flatMap(({ rollout_id }) => {
    const outcome = outcomes.get(rollout_id)
    return outcome?.status === 'done' ? [outcome] : []
  })
  const documents = await memory.get(done.map((outcome) => outcome.document_id))
  const records = documents.map((doc) => ({
    rollout_id: String(doc.data.rollout_id),
    score: Number(doc.data.score),
    analysis: doc.data.analysis as Analysis,
  }))
  const latest = documents.at(-1)?.data.metadata as TrainingMetadata | undefined
  return {
    records,
    ...(latest ? { latest } : {}),
    counts: {
      analysed: done.length,
      failed: selected.length - done.length,
      reasons,
      hacking_flags: done.filter((outcome) => outcome.hacking).length,
    },
  }
}

async function analyseRollouts(
  env: Env,
  config: RunConfig,
  job: StepJob,
  todo: readonly SelectedRollout[],
  byId: ReadonlyMap<string, StepRollout>,
  memory: MemoryStore,
  models: ReturnType<typeof requestModels>,
  progress: UpdateProgress,
): Promise<{ rollout_id: string; analysis: RolloutAnalysis; transient: boolean }[]> {
  if (todo.length === 0) return []
  const { full, versions } = await recordedRollouts(
    env,
    job,
    todo.map(({ rollout_id }) => rollout_id),
    byId,
  )
  const analyzer = models.forRole('analyzer')
  const now = new Date().toISOString()
  const results = await Promise.all(
    todo.map(
      async ({
        rollout_id,
        reasons,
      }): Promise<{
        rollout_id: string
        reasons: AnalysisReason[]
        document: MemoryDocument | undefined
        transient: boolean
      }> => {
        const input = full.get(rollout_id)
        if (!input) return { rollout_id, reasons, document: undefined, transient: true }
        try {
          const rubrics = versions[input.entry.rubric_version] ?? []
          const analysis = await runAnalyzer(
            analyzer.model,
            {
              rollout: input.rollout,
              metadata: input.metadata,
              rubrics,
              score: input.entry.score,
              criteria: await criteriaWithReasons(config, () => models.forRole('scorer'), input, rubrics),
              gradeMax: config.grade_max,
              locale: config.locale,
              prompts: config.prompts,
            },
            { maxAttempts: analyzer.settings.max_attempts },
          )
          const document = await analysisDocument(job, input, analysis, reasons, now)
          progress.analyses.done++
          return { rollout_id, reasons, document, transient: false }
        } catch (error) {
          progress.analyses.failed++
          console.warn(`[${job.runId}/${job.instanceId} step ${job.step}] analysis of ${rollout_id} failed`, error)
          return {
            rollout_id,
            reasons,
            document: undefined,
            transient: !(error instanceof LlmError && !error.transient),
          }
        }
      },
    ),
  )
  await memory.put(results.flatMap(({ document }) => (document ? [document] : [])))
  return results.map(({ rollout_id, reasons, document, transient }) => ({
    rollout_id,
    transient,
    analysis: document
      ? {
          status: 'done',
          document_id: document.id,
          hacking: (document.data.analysis as Analysis).reward_hacking.flag,
          reasons,
        }
      : { status: 'failed', reasons },
  }))
}

/** A rollout's analysis as the memory keeps it: what the summariser reads and the dashboard shows as evidence. */
async function analysisDocument(
  job: StepJob,
  input: RecordedRollout,
  analysis: Analysis,
  reasons: AnalysisReason[],
  createdAt: string,
): Promise<MemoryDocument> {
  const rolloutId = input.entry.rollout_id
  return {
    id: await MemoryStore.documentId('analysis', job.runId, job.instanceId, job.step, rolloutId),
    run_id: job.runId,
    instance_id: job.instanceId,
    kind: 'analysis',
    step: job.step,
    text: analysisText(rolloutId, input.entry.score, analysis),
    data: {
      subject: rolloutId,
      rollout_id: rolloutId,
      score: input.entry.score,
      metadata: input.metadata,
      analysis,
      reasons,
      // A flagged rollout keeps an excerpt as evidence: the ledger deletes the rollout itself a few steps later.
      ...(analysis.reward_hacking.flag
        ? {
            rollout: {
              input: input.rollout.input.slice(0, EXCERPT_CHARS),
              output: input.rollout.output.slice(0, EXCERPT_CHARS),
              truncated: input.rollout.output.length > EXCERPT_CHARS,
            },
          }
        : {}),
    },
    created_at: createdAt,
  }
}

async function recordOnShards(
  env: Env,
  job: StepJob,
  results: readonly { rollout_id: string; analysis: RolloutAnalysis }[],
  byId: ReadonlyMap<string, StepRollout>,
): Promise<void> {
  const byShard = groupBy(results, ({ rollout_id }) => byId.get(rollout_id)!.shard)
  await Promise.all(
    [...byShard].map(([shard, outcomes]) =>
      objects.ledger(env, { runId: job.runId, instanceId: job.instanceId, shard }, (ledger) =>
        ledger.recordAnalyses(job.step, outcomes),
      ),
    ),
  )
}

async function planUpdate(
  env: Env,
  config: RunConfig,
  job: StepJob,
  snapshot: RubricSnapshot,
  analyses: { records: AnalysisRecord[]; latest?: TrainingMetadata },
  counts: Counts,
  models: ReturnType<typeof requestModels>,
  health: readonly CriterionStepHealth[],
  progress: UpdateProgress,
): Promise<StepUpdateCommit> {
  if (analyses.records.length === 0) return noChange(snapshot, 'no analysed rollouts in this step', counts)
  const memory = memoryFor(env, job.runId, { limit: models.limit })
  const rubrics = snapshot.rubrics
  noteProgress(progress, 'summarising')
  // A redelivered job reuses the summary it already remembered, so the updater works from that one.
  const summary =
    (await storedStepSummary(memory, job)) ??
    (await summarizeAndRemember(memory, models, config, job, analyses.records, rubrics))
  if (job.step % config.rubric_update_frequency !== 0)
    return noChange(snapshot, 'summary only: not an update step', counts)

  noteProgress(progress, 'updating')
  const { queries, retrieved } = await consultMemory(env, config, job, memory, models, { summary, rubrics })
  const latest = analyses.latest
  const updater = models.forRole('updater')
  const update = await runUpdater(
    updater.model,
    {
      rubrics,
      summary,
      memories: formatMemoriesForPrompt(retrieved.static, retrieved.dynamic),
      step: job.step,
      stage: trainingStage(latest?.current_step ?? job.step, latest?.total_steps ?? Math.max(1, job.step + 1)),
      ...(latest?.high_level_goal ? { goal: latest.high_level_goal } : {}),
      locale: config.locale,
      prompts: config.prompts,
      health,
    },
    { maxAttempts: updater.settings.max_attempts },
  )
  const applied = applyRubricUpdate(rubrics, update, {
    version: snapshot.version + 1,
    createdAt: new Date().toISOString(),
  })
  const changed = applied.accepted && Object.values(applied.diff).some((ids) => ids.length > 0)
  if (applied.refused.length > 0)
    console.warn(`[${job.runId}/${job.instanceId} step ${job.step}] updater proposal partly refused:`, applied.refused)
  await memory.put([
    await updateDocument(
      job,
      update,
      applied.diff,
      applied.refused,
      changed ? snapshot.version + 1 : snapshot.version,
      queries,
      retrieved,
    ),
  ])
  return {
    baseVersion: snapshot.version,
    ...(changed ? { rubrics: applied.rubrics } : {}),
    strategy: update.strategy,
    rationale: update.rationale,
    diff: { ...applied.diff },
    refused: applied.refused,
    note: changed
      ? `${update.strategy} update at step ${job.step}`
      : `${update.strategy}: no change${applied.accepted ? '' : ' (proposal refused)'}`,
    counts,
  }
}

/**
 * What the updater reads from memory: the summaries of the last `static_memory_steps` steps, and the documents the
 * queries generated from this step's summary find (in the instance's own memory when each instance has its rubrics).
 */
async function consultMemory(
  env: Env,
  config: RunConfig,
  job: StepJob,
  memory: MemoryStore,
  models: ReturnType<typeof requestModels>,
  step: { summary: BatchSummary; rubrics: RubricSnapshot['rubrics'] },
): Promise<{ queries: string[]; retrieved: Awaited<ReturnType<typeof retrieveMemories>> }> {
  const queryGenerator = models.forRole('query_generator')
  const queries = await runQueryGenerator(
    queryGenerator.model,
    { ...step, maxQueries: config.max_queries, locale: config.locale, prompts: config.prompts },
    { maxAttempts: queryGenerator.settings.max_attempts },
  )
  const instanceScope = config.rubrics_mode === 'per_instance' ? job.instanceId : undefined
  const retrieved = await retrieveMemories({
    static: await memory.recentSummaries(job.runId, job.instanceId, job.step - 1, config.static_memory_steps),
    queries,
    scope: { run_id: job.runId, ...(instanceScope ? { instance_id: instanceScope } : {}) },
    limitPerQuery: config.dynamic_memory_limit_per_query,
    embedder: embedderFor(env, { limit: models.limit }),
    index: vectorIndexFor(env, job.runId),
    loadDocuments: (ids) => memory.get(ids),
  })
  return { queries, retrieved }
}

/**
 * After the commit: every ledger shard of the instance learns the rubrics now in force (so the isolates they answer
 * do too) and that the step's rows may age out; then the coordinator counts the instance done.
 */
async function finish(
  env: Env,
  config: RunConfig,
  job: StepJob,
  outcome: StepUpdateOutcome,
  snapshot: RubricSnapshot,
  calls: readonly LlmCallRecord[],
): Promise<StepUpdateOutcome> {
  await Promise.all(
    Array.from({ length: ledgerShardsOf(config) }, (_, shard) =>
      objects.ledger(env, { runId: job.runId, instanceId: job.instanceId, shard }, (ledger) =>
        ledger.stepUpdated(job.step, snapshot),
      ),
    ),
  )
  await objects.coordinator(env, job.runId, (coordinator) =>
    coordinator.instanceUpdated(job.step, job.instanceId, outcome, llmStats(calls)),
  )
  return outcome
}

async function storedStepSummary(memory: MemoryStore, job: StepJob): Promise<BatchSummary | undefined> {
  const ids = await Promise.all(
    (['meta_summary', 'batch_summary'] as const).map((kind) =>
      MemoryStore.documentId(kind, job.runId, job.instanceId, job.step, STEP_SUBJECT),
    ),
  )
  const [stored] = await memory.get(ids)
  return stored?.data.summary as BatchSummary | undefined
}

async function summarizeAndRemember(
  memory: MemoryStore,
  models: ReturnType<typeof requestModels>,
  config: RunConfig,
  job: StepJob,
  records: AnalysisRecord[],
  rubrics: RubricSnapshot['rubrics'],
): Promise<BatchSummary> {
  const summarizer = models.forRole('summarizer')
  const { summary, chunks } = await summarizeStep(summarizer.model, records, config.chunk_size, {
    rubrics,
    step: job.step,
    locale: config.locale,
    prompts: config.prompts,
    retry: { maxAttempts: summarizer.settings.max_attempts },
    concurrency: Math.min(summarizer.settings.concurrency, config.max_concurrent_llm_calls),
    metaModel: models.forRole('meta_summarizer').model,
  })
  await memory.put(await summaryDocuments(job, summary, chunks))
  return summary
}

function retirementPolicy(config: RunConfig) {
  return {
    retireAfterSteps: config.retire_after_steps,
    minSpread: config.retire_below_spread,
    maxActive: config.max_active_rubrics,
  }
}

const isRetired = (rubricId: string, retired: readonly Retirement[]) =>
  retired.some((entry) => entry.rubric_id === rubricId)

/**
 * The commit with the retired criteria gone from it: the rubrics it leaves in force lack them (a new version even when
 * the updater changed nothing), and its note and diff say which and why.
 */
function withRetirements(
  commit: StepUpdateCommit,
  kept: RubricSnapshot,
  retired: readonly Retirement[],
): StepUpdateCommit {
  if (retired.length === 0) return commit
  const rubrics = (commit.rubrics ?? kept.rubrics).filter((rubric) => !isRetired(rubric.id, retired))
  const named = retired.map((entry) => `${entry.rubric_id} (${entry.reason})`).join('; ')
  return {
    ...commit,
    rubrics,
    strategy: commit.strategy ?? 'RETIRE',
    // A cap after a retirement adds to the list the retirement started.
    diff: {
      ...(commit.diff ?? {}),
      retired: [
        ...((commit.diff?.retired as Retirement[] | undefined) ?? []),
        ...retired.map((entry) => ({ ...entry })),
      ],
    },
    note: `retired ${named}; ${commit.note}`,
  }
}

/** Applies `max_active_rubrics` to what the updater left (criteria it just added have no health yet and stay). */
function capActive(
  commit: StepUpdateCommit,
  kept: RubricSnapshot,
  config: RunConfig,
  history: readonly (readonly CriterionStepHealth[])[],
): StepUpdateCommit {
  if (config.max_active_rubrics === null) return commit
  const rubrics = commit.rubrics ?? kept.rubrics
  const over = retirements(rubrics, history, { ...retirementPolicy(config), retireAfterSteps: null })
  return withRetirements(commit, { ...kept, rubrics }, over)
}

function withHealth(commit: StepUpdateCommit, health: CriterionStepHealth[]): StepUpdateCommit {
  return health.length > 0 ? { ...commit, health } : commit
}

function noChange(snapshot: RubricSnapshot, note: string, counts: Counts, error?: string): StepUpdateCommit {
  return {
    baseVersion: snapshot.version,
    strategy: null,
    rationale: null,
    diff: null,
    refused: [],
    note,
    counts,
    ...(error ? { error } : {}),
  }
}

function unreachable(): never {
  throw new Error('a commit without new rubrics is never stale')
}

/** The text an analysis is remembered and searched by. */
function analysisText(rolloutId: string, score: number, analysis: Analysis): string {
  const hacking = analysis.reward_hacking
  return [
    `Rollout ${rolloutId} scored ${score.toFixed(2)}. ${analysis.overall_assessment}`,
    hacking.flag
      ? `Reward hacking (${hacking.severity}): ${hacking.tactics.join(', ')}. Evidence: ${hacking.evidence.join(' | ')}`
      : '',
    analysis.rubric_effectiveness ? `Rubrics: ${analysis.rubric_effectiveness}` : '',
    analysis.stage_performance ? `Stage: ${analysis.stage_performance}` : '',
    ...analysis.observations,
  ]
    .filter(Boolean)
    .join('\n')
}

async function summaryDocuments(
  job: StepJob,
  summary: BatchSummary,
  chunks: BatchSummary[],
): Promise<MemoryDocument[]> {
  const now = new Date().toISOString()
  const doc = async (
    kind: 'batch_summary' | 'meta_summary',
    subject: string,
    body: BatchSummary,
  ): Promise<MemoryDocument> => ({
    id: await MemoryStore.documentId(kind, job.runId, job.instanceId, job.step, subject),
    run_id: job.runId,
    instance_id: job.instanceId,
    kind,
    step: job.step,
    text:
      `Step ${job.step} summary${subject === STEP_SUBJECT ? '' : ` (${subject})`}: ${body.executive_summary}\n` +
      `${body.memory_entry}\nPatterns: ${body.systemic_patterns.join('; ')}\n` +
      `Reward hacking: ${body.reward_hacking.count} (${body.reward_hacking.tactics.join(', ')})\n` +
      `Plan: ${body.evolution_plan}`,
    data: { subject, summary: body },
    created_at: now,
  })
  // The step's summary is the batch summary; when the step was chunked, the chunks are batch summaries
  // of their own and the consolidation is the meta summary that stands for the step.
  if (chunks.length === 0) return [await doc('batch_summary', STEP_SUBJECT, summary)]
  return Promise.all([
    ...chunks.map((chunk, i) => doc('batch_summary', `chunk-${i + 1}`, chunk)),
    doc('meta_summary', STEP_SUBJECT, summary),
  ])
}

async function updateDocument(
  job: StepJob,
  update: RubricUpdate,
  diff: RubricDiff,
  refused: string[],
  version: number,
  queries: string[],
  consulted: { static: MemoryDocument[]; dynamic: MemoryDocument[] },
): Promise<MemoryDocument> {
  return {
    id: await MemoryStore.documentId('rubric_update', job.runId, job.instanceId, job.step),
    run_id: job.runId,
    instance_id: job.instanceId,
    kind: 'rubric_update',
    step: job.step,
    text:
      `Step ${job.step} rubric update (${update.strategy}) → version ${version}: ${update.rationale}\n` +
      `Added ${diff.added.length}, removed ${diff.removed.length}, modified ${diff.modified.length}, ` +
      `reweighted ${diff.reweighted.length}.${refused.length ? `\nRefused: ${refused.join('; ')}` : ''}`,
    data: {
      subject: STEP_SUBJECT,
      update,
      diff,
      refused,
      rubric_version: version,
      queries,
      static: consulted.static.map((doc) => doc.id),
      retrieved: consulted.dynamic.map((doc) => doc.id),
    },
    created_at: new Date().toISOString(),
  }
}
