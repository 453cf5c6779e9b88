import { summarizeStep } from '../../src/agents/meta-summarizer/index.ts'
import { runQueryGenerator } from '../../src/agents/query-generator/index.ts'
import { applyRubricUpdate, runUpdater, type RubricDiff } from '../../src/agents/updater/index.ts'
import { formatMemoriesForPrompt } from '../../src/memory/format-memories.ts'
import { retrieveMemories } from '../../src/memory/retrieval.ts'
import { trainingStage, type AnalysisRecord, type BatchSummary, type RubricUpdate } from '../../src/schemas/agents.ts'
import type { MemoryDocument } from '../../src/schemas/memory.ts'
import type { TrainingMetadata } from '../../src/schemas/rollout.ts'
import type { RunConfig } from '../../src/schemas/run-config.ts'
import type { Rubric } from '../../src/schemas/rubric.ts'
import type { StepUpdateCommit, StepUpdateInput, StepUpdateOutcome } from '../../durable-objects/rubric-instance/index.ts'
import { coordinatorName, instanceName } from '../../durable-objects/names.ts'
import type { Env } from '../env.ts'
import { embedderFor, memoryFor, vectorIndexFor } from '../memory/backends.ts'
import { MemoryStore, STEP_SUBJECT } from '../memory/store.ts'
import { sendAnalysisJobs, type StepJob } from '../queues/messages.ts'
import { loadRunConfig } from '../runs/store.ts'
import { requestModels } from '../scoring/models.ts'
import { writeRecords } from '../scoring/persist.ts'

export type StepJobResult = { state: 'waiting'; retryInMs: number } | { state: 'done'; outcome: StepUpdateOutcome }

/**
 * One instance's update for a closed step: wait for its analyses (until the deadline) → summarise
 * (chunked) → on update steps, generate queries → retrieve memory → update the adaptive rubrics →
 * commit the new version and remember the update → tell the coordinator. Every stage is idempotent,
 * so a redelivered or retried job repeats no committed work. On the job's last attempt a failure
 * commits "no change" with the error, so the step still completes.
 * @example const result = await updateInstanceStep(env, job, { lastAttempt: false })
 */
export async function updateInstanceStep(env: Env, job: StepJob, options: { lastAttempt: boolean }): Promise<StepJobResult> {
  const config = await loadRunConfig(env.DB, job.runId)
  if (!config) throw new Error(`run "${job.runId}" does not exist`)
  const address = { runId: job.runId, instanceId: job.instanceId }
  const instance = env.RUBRIC_INSTANCE.getByName(instanceName(job.runId, job.instanceId))
  const input: StepUpdateInput = await instance.stepUpdateInput(address, job.step, job.deadline)
  if (input.state === 'waiting') return { state: 'waiting', retryInMs: input.retryInMs }
  const outcome = input.state === 'done' ? input.outcome : await instance.commitStepUpdate(address, job.step, await planUpdate(env, config, job, input, options))
  await env.RUN_COORDINATOR.getByName(coordinatorName(job.runId)).instanceUpdated(job.runId, job.step, job.instanceId, outcome)
  return { state: 'done', outcome }
}

/**
 * Reports a step job that exhausted its retries as done with no change, so the step completes.
 * @example await abandonInstanceStep(env, message.body, 'the updater failed 4 times')
 */
export async function abandonInstanceStep(env: Env, job: StepJob, reason: string): Promise<void> {
  const address = { runId: job.runId, instanceId: job.instanceId }
  const instance = env.RUBRIC_INSTANCE.getByName(instanceName(job.runId, job.instanceId))
  const outcome = await instance.commitStepUpdate(address, job.step, noChange(`update abandoned: ${reason}`, [], { late: 0, failed: 0, missing: 0, hacking_flags: 0 }, reason))
  await env.RUN_COORDINATOR.getByName(coordinatorName(job.runId)).instanceUpdated(job.runId, job.step, job.instanceId, outcome)
}

async function planUpdate(
  env: Env,
  config: RunConfig,
  job: StepJob,
  input: Extract<StepUpdateInput, { state: 'ready' }>,
  options: { lastAttempt: boolean },
): Promise<StepUpdateCommit> {
  if (input.stillPending.length > 0) {
    // A lost analysis message would otherwise stay pending forever; the jobs are idempotent.
    await sendAnalysisJobs(env.ANALYSIS_QUEUE, [{ type: 'analysis', runId: job.runId, instanceId: job.instanceId, rollouts: input.stillPending }])
  }
  const consumed = input.analyses.map(({ step, rollout_id }) => ({ step, rollout_id }))
  const counts = { late: input.late, failed: input.failed, missing: input.pending, hacking_flags: input.analyses.filter((a) => a.hacking).length }
  if (input.analyses.length === 0) return noChange('no analysed rollouts in this step', consumed, counts)
  const memory = memoryFor(env, job.runId)
  const models = requestModels(env, config)
  try {
    const documents = await memory.get(input.analyses.map((a) => a.document_id))
    const records: AnalysisRecord[] = documents.map((doc) => ({ rollout_id: String(doc.data.rollout_id), score: Number(doc.data.score), analysis: doc.data.analysis as AnalysisRecord['analysis'] }))
    const latest = documents.at(-1)?.data.metadata as TrainingMetadata | undefined
    const rubrics = input.snapshot.rubrics
    // A redelivered job reuses the summary it already remembered, so the updater works from that one.
    const summary = (await storedStepSummary(memory, job)) ?? (await summarizeAndRemember(memory, models, config, job, records, rubrics))
    if (job.step % config.rubric_update_frequency !== 0) return noChange('summary only: not an update step', consumed, counts)

    const queryGenerator = models.forRole('query_generator')
    const queries = await runQueryGenerator(queryGenerator.model, { summary, rubrics, maxQueries: config.max_queries, locale: config.locale, prompts: config.prompts }, { maxAttempts: queryGenerator.settings.max_attempts })
    const instanceScope = config.rubrics_mode === 'per_instance' ? job.instanceId : undefined
    const retrieved = await retrieveMemories({
      static: await memory.recentSummaries(job.runId, job.instanceId, job.step - 1, config.static_memory_steps),
      queries,
      scope: { run_id: job.runId, ...(instanceScope ? { instance_id: instanceScope } : {}) },
      limitPerQuery: config.dynamic_memory_limit_per_query,
      embedder: embedderFor(env),
      index: vectorIndexFor(env, job.runId),
      loadDocuments: (ids) => memory.get(ids),
    })
    const updater = models.forRole('updater')
    const update = await runUpdater(updater.model, {
      rubrics, summary, memories: formatMemoriesForPrompt(retrieved.static, retrieved.dynamic), step: job.step,
      stage: trainingStage(latest?.current_step ?? job.step, latest?.total_steps ?? Math.max(1, job.step + 1)),
      ...(latest?.high_level_goal ? { goal: latest.high_level_goal } : {}),
      locale: config.locale,
      prompts: config.prompts,
    }, { maxAttempts: updater.settings.max_attempts })
    const applied = applyRubricUpdate(rubrics, update, { version: input.snapshot.version + 1, createdAt: new Date().toISOString() })
    const changed = applied.accepted && Object.values(applied.diff).some((ids) => ids.length > 0)
    if (applied.refused.length > 0) console.warn(`[${job.runId}/${job.instanceId} step ${job.step}] updater proposal partly refused:`, applied.refused)
    await memory.put([await updateDocument(job, update, applied.diff, applied.refused, changed ? input.snapshot.version + 1 : input.snapshot.version, queries, retrieved)])
    return {
      ...(changed ? { rubrics: applied.rubrics } : {}),
      strategy: update.strategy,
      rationale: update.rationale,
      diff: { ...applied.diff },
      refused: applied.refused,
      note: changed ? `${update.strategy} update at step ${job.step}` : `${update.strategy}: no change${applied.accepted ? '' : ' (proposal refused)'}`,
      consumedRolloutIds: consumed,
      counts,
    }
  } catch (error) {
    if (!options.lastAttempt) throw error
    return noChange('update failed; the previous rubrics stay in force', consumed, counts, String((error as Error).message ?? error))
  } finally {
    await writeRecords(env.DB, [{ runId: job.runId, requestId: `step:${job.step}:${job.instanceId}`, calls: models.calls }])
  }
}

async function storedStepSummary(memory: MemoryStore, job: StepJob): Promise<BatchSummary | undefined> {
  const ids = await Promise.all((['meta_summary', 'batch_summary'] as const).map((kind) => MemoryStore.documentId(kind, job.runId, job.instanceId, job.step, STEP_SUBJECT)))
  const [stored] = await memory.get(ids)
  return stored?.data.summary as BatchSummary | undefined
}

async function summarizeAndRemember(
  memory: MemoryStore,
  models: ReturnType<typeof requestModels>,
  config: RunConfig,
  job: StepJob,
  records: AnalysisRecord[],
  rubrics: Rubric[],
): Promise<BatchSummary> {
  const summarizer = models.forRole('summarizer')
  const { summary, chunks } = await summarizeStep(summarizer.model, records, config.chunk_size, {
    rubrics, step: job.step, locale: config.locale, prompts: config.prompts, retry: { maxAttempts: summarizer.settings.max_attempts },
    concurrency: Math.min(summarizer.settings.concurrency, config.max_concurrent_llm_calls), metaModel: models.forRole('meta_summarizer').model,
  })
  await memory.put(await summaryDocuments(job, summary, chunks))
  return summary
}

function noChange(note: string, consumed: StepUpdateCommit['consumedRolloutIds'], counts: StepUpdateCommit['counts'], error?: string): StepUpdateCommit {
  return { strategy: null, rationale: null, diff: null, refused: [], note, consumedRolloutIds: consumed, counts, ...(error ? { error } : {}) }
}

async function summaryDocuments(job: StepJob, summary: BatchSummary, chunks: BatchSummary[]): Promise<MemoryDocument[]> {
  const now = new Date().toISOString()
  const doc = async (kind: 'batch_summary' | 'meta_summary', subject: string, body: BatchSummary): Promise<MemoryDocument> => ({
    id: await MemoryStore.documentId(kind, job.runId, job.instanceId, job.step, subject),
    run_id: job.runId, instance_id: job.instanceId, kind, step: job.step,
    text: `Step ${job.step} summary${subject === STEP_SUBJECT ? '' : ` (${subject})`}: ${body.executive_summary}\n${body.memory_entry}\nPatterns: ${body.systemic_patterns.join('; ')}\nReward hacking: ${body.reward_hacking.count} (${body.reward_hacking.tactics.join(', ')})\nPlan: ${body.evolution_plan}`,
    data: { subject, summary: body },
    created_at: now,
  })
  // The step's summary is the batch summary; when the step was chunked, the chunks are batch summaries
  // of their own and the consolidation is the meta summary that stands for the step.
  if (chunks.length === 0) return [await doc('batch_summary', STEP_SUBJECT, summary)]
  return Promise.all([...chunks.map((chunk, i) => doc('batch_summary', `chunk-${i + 1}`, chunk)), doc('meta_summary', STEP_SUBJECT, summary)])
}

async function updateDocument(job: StepJob, update: RubricUpdate, diff: RubricDiff, refused: string[], version: number, queries: string[], consulted: { static: MemoryDocument[]; dynamic: MemoryDocument[] }): Promise<MemoryDocument> {
  return {
    id: await MemoryStore.documentId('rubric_update', job.runId, job.instanceId, job.step),
    run_id: job.runId, instance_id: job.instanceId, kind: 'rubric_update', step: job.step,
    text: `Step ${job.step} rubric update (${update.strategy}) → version ${version}: ${update.rationale}\nAdded ${diff.added.length}, removed ${diff.removed.length}, modified ${diff.modified.length}, reweighted ${diff.reweighted.length}.${refused.length ? `\nRefused: ${refused.join('; ')}` : ''}`,
    data: { subject: STEP_SUBJECT, update, diff, refused, rubric_version: version, queries, static: consulted.static.map((doc) => doc.id), retrieved: consulted.dynamic.map((doc) => doc.id) },
    created_at: new Date().toISOString(),
  }
}
