/**
 * What the dashboard reads, all of it already stored by the API: D1 (runs, score events, LLM calls, memory,
 * deployments) and the Durable Objects' own read methods (status, timeline, instances, rubric history).
 * Nothing here writes.
 */
import { and, desc, eq, gte, inArray, sql } from 'drizzle-orm'
import { drizzle } from 'drizzle-orm/d1'
import { coordinatorName, instanceName } from '../../durable-objects/names.ts'
import type { AnalysisInput, RubricVersionRecord } from '../../durable-objects/rubric-instance/index.ts'
import type { StepTimelineEntry } from '../../durable-objects/run-coordinator/index.ts'
import { llmCalls, memoryDocuments, rmArtifacts, rmDeployments, runs, scoreEvents } from '../../src/db/schema.ts'
import type { Analysis } from '../../src/schemas/agents.ts'
import type { MemoryDocument, MemoryKind } from '../../src/schemas/memory.ts'
import { RunConfig } from '../../src/schemas/run-config.ts'
import type { RubricStatus } from '../../src/schemas/status.ts'
import type { Env, Principal } from '../env.ts'
import { listDeployments } from '../artifacts/store.ts'
import { memoryFor } from '../memory/backends.ts'
import { DEFAULT_RUN_ID, loadRunConfig } from '../runs/store.ts'

/** Runs the index lists at most (newest first). */
const MAX_LISTED_RUNS = 200
/** Steps whose score distributions are drawn one histogram each. */
export const HISTOGRAM_STEPS = 6
/** Score values read for those histograms at most. */
const MAX_HISTOGRAM_VALUES = 20_000
/** Flagged analyses shown, newest first. */
const MAX_HACKING_FLAGS = 25
/** Characters of a flagged rollout's output shown as evidence. */
const ROLLOUT_EXCERPT_CHARS = 800
/** Deploy targets and stored artifacts the targets page lists at most. */
const MAX_TARGETS = 100
const MAX_ARTIFACTS = 100
/** Memory documents the browser shows per page. */
export const MEMORY_PAGE = 15

/** One row of the runs index. */
export interface RunSummary {
  id: string
  created_at: string | null
  mode: RunConfig['mode']
  rubrics_mode: RunConfig['rubrics_mode']
  access: RunConfig['access']
  scores: number
  last_step: number | null
  last_scored_at: string | null
}

/**
 * The runs a viewer may open: the admin sees every run, a run token its own run, anyone else the open runs
 * (and the default run under local development, as the API allows).
 * @example const runs = await visibleRuns(env, { kind: 'admin' })
 */
export async function visibleRuns(env: Env, viewer: Principal): Promise<RunSummary[]> {
  const orm = drizzle(env.DB)
  const local = env.DEPLOYMENT === 'local'
  const created =
    viewer.kind === 'admin'
      ? await orm.select().from(runs).orderBy(desc(runs.createdAt)).limit(MAX_LISTED_RUNS).all()
      : viewer.kind === 'run'
        ? await orm.select().from(runs).where(eq(runs.id, viewer.runId)).all()
        : await orm.select().from(runs).where(sql`json_extract(${runs.config}, '$.access') = 'open'`).orderBy(desc(runs.createdAt)).limit(MAX_LISTED_RUNS).all()
  const listed: { id: string; created_at: string | null; config: RunConfig }[] = created.map((row) => ({ id: row.id, created_at: row.createdAt, config: RunConfig.parse(row.config) }))
  const defaultConfig = (await loadRunConfig(env.DB, DEFAULT_RUN_ID))!
  const seesDefault = viewer.kind === 'admin' || (viewer.kind === 'anonymous' && (local || defaultConfig.access === 'open'))
  if (seesDefault) listed.unshift({ id: DEFAULT_RUN_ID, created_at: null, config: defaultConfig })
  if (listed.length === 0) return []
  const activity = await orm
    .select({ runId: scoreEvents.runId, scores: sql<number>`count(*)`, lastStep: sql<number>`max(${scoreEvents.step})`, lastAt: sql<string>`max(${scoreEvents.createdAt})` })
    .from(scoreEvents)
    .where(inArray(scoreEvents.runId, listed.map((run) => run.id)))
    .groupBy(scoreEvents.runId)
    .all()
  const byRun = new Map(activity.map((row) => [row.runId, row]))
  return listed.map(({ id, created_at, config }) => ({
    id,
    created_at,
    mode: config.mode,
    rubrics_mode: config.rubrics_mode,
    access: config.access,
    scores: byRun.get(id)?.scores ?? 0,
    last_step: byRun.get(id)?.lastStep ?? null,
    last_scored_at: byRun.get(id)?.lastAt ?? null,
  }))
}

/** Scores served in one step (duplicates left out: they repeat an earlier score). */
export interface StepScores {
  step: number
  count: number
  mean: number
  min: number
  max: number
  min_version: number
  max_version: number
}

/** A rollout the analyzer flagged as reward hacking, with its evidence. */
export interface HackingFlag {
  document_id: string
  instance_id: string
  step: number
  rollout_id: string
  score: number | null
  severity: string
  tactics: string[]
  evidence: string[]
  assessment: string
  /** The rollout as scored, when its instance still holds it. */
  rollout: { input: string; output: string; truncated: boolean } | null
}

/** LLM calls of the run by role, model and outcome. */
export interface LlmCallGroup {
  role: string
  model: string
  outcome: string
  calls: number
  mean_latency_ms: number
  prompt_tokens: number
  completion_tokens: number
}

/** The memory browser's request: a semantic query, or a filtered listing. */
export interface MemoryRequest {
  q?: string
  kind?: MemoryKind
}

/** Everything the run page shows. */
export interface RunDashboard {
  run: { id: string; config: RunConfig }
  status: RubricStatus
  timeline: StepTimelineEntry[]
  instances: { instance_id: string; rubric_version: number; rollouts: number }[]
  /** The instance whose rubric history is shown; null in per_instance mode before any rollout. */
  instanceId: string | null
  history: RubricVersionRecord[]
  stepScores: StepScores[]
  /** Raw scores of the last `HISTOGRAM_STEPS` steps, by step. */
  recentScores: Map<number, number[]>
  hacking: HackingFlag[]
  llmCalls: LlmCallGroup[]
  memory: { request: MemoryRequest; documents: (MemoryDocument & { similarity?: number })[] }
}

/**
 * Reads the run page's data in parallel: DO status, timeline and rubric history, D1 aggregates, flagged analyses,
 * and the memory page (a semantic search when `memory.q` is given).
 * @example const data = await loadRunDashboard(env, run, { instance: 'global', memory: { q: 'hacking' } })
 */
export async function loadRunDashboard(env: Env, run: { id: string; config: RunConfig }, options: { instance?: string; memory: MemoryRequest }): Promise<RunDashboard> {
  const coordinator = env.RUN_COORDINATOR.getByName(coordinatorName(run.id))
  const [status, timeline, instances] = await Promise.all([coordinator.status(run.id), coordinator.timeline(), coordinator.instances()])
  const instanceId =
    run.config.rubrics_mode === 'global'
      ? 'global'
      : (instances.find((instance) => instance.instance_id === options.instance)?.instance_id ?? instances[0]?.instance_id ?? null)
  const history: Promise<RubricVersionRecord[]> = instanceId === null
    ? Promise.resolve([])
    : env.RUBRIC_INSTANCE.getByName(instanceName(run.id, instanceId)).history({ runId: run.id, instanceId })
  const [versions, stepScores, recentScores, hacking, calls, memory] = await Promise.all([
    history,
    scoresByStep(env.DB, run.id),
    recentStepScores(env.DB, run.id),
    hackingFlags(env, run.id),
    llmCallGroups(env.DB, run.id),
    memoryPage(env, run.id, options.memory),
  ])
  return { run, status, timeline, instances, instanceId, history: versions, stepScores, recentScores, hacking, llmCalls: calls, memory: { request: options.memory, documents: memory } }
}

async function scoresByStep(db: D1Database, runId: string): Promise<StepScores[]> {
  return drizzle(db)
    .select({
      step: scoreEvents.step,
      count: sql<number>`count(*)`,
      mean: sql<number>`avg(${scoreEvents.score})`,
      min: sql<number>`min(${scoreEvents.score})`,
      max: sql<number>`max(${scoreEvents.score})`,
      min_version: sql<number>`min(${scoreEvents.rubricVersion})`,
      max_version: sql<number>`max(${scoreEvents.rubricVersion})`,
    })
    .from(scoreEvents)
    .where(and(eq(scoreEvents.runId, runId), eq(scoreEvents.duplicate, false)))
    .groupBy(scoreEvents.step)
    .orderBy(scoreEvents.step)
    .all()
}

async function recentStepScores(db: D1Database, runId: string): Promise<Map<number, number[]>> {
  const orm = drizzle(db)
  const last = await orm.select({ step: sql<number | null>`max(${scoreEvents.step})` }).from(scoreEvents).where(eq(scoreEvents.runId, runId)).get()
  const byStep = new Map<number, number[]>()
  if (last?.step === null || last?.step === undefined) return byStep
  const rows = await orm
    .select({ step: scoreEvents.step, score: scoreEvents.score })
    .from(scoreEvents)
    .where(and(eq(scoreEvents.runId, runId), eq(scoreEvents.duplicate, false), gte(scoreEvents.step, last.step - HISTOGRAM_STEPS + 1)))
    .limit(MAX_HISTOGRAM_VALUES)
    .all()
  for (const row of rows) byStep.set(row.step, [...(byStep.get(row.step) ?? []), row.score])
  return new Map([...byStep].sort(([a], [b]) => a - b))
}

async function hackingFlags(env: Env, runId: string): Promise<HackingFlag[]> {
  const rows = await drizzle(env.DB)
    .select()
    .from(memoryDocuments)
    .where(and(
      eq(memoryDocuments.runId, runId),
      eq(memoryDocuments.kind, 'analysis'),
      sql`json_extract(${memoryDocuments.data}, '$.analysis.reward_hacking.flag') = 1`,
    ))
    .orderBy(desc(memoryDocuments.step), desc(memoryDocuments.createdAt))
    .limit(MAX_HACKING_FLAGS)
    .all()
  const rolloutIdOf = (row: (typeof rows)[number]) => {
    const data = row.data as { rollout_id?: unknown }
    return typeof data.rollout_id === 'string' ? data.rollout_id : (row.subject ?? '')
  }
  // The flagged rollouts' texts: one Durable Object read per instance, not one per flag.
  const keyOf = (instanceId: string, step: number, rolloutId: string) => `${instanceId}\u0000${step}\u0000${rolloutId}`
  const inputs = new Map<string, AnalysisInput>()
  await Promise.all([...new Set(rows.map((row) => row.instanceId))].map(async (instanceId) => {
    const keys = rows.filter((row) => row.instanceId === instanceId).map((row) => ({ step: row.step, rollout_id: rolloutIdOf(row) }))
    const found = (await env.RUBRIC_INSTANCE.getByName(instanceName(runId, instanceId)).analysisInputs({ runId, instanceId }, keys)) as AnalysisInput[]
    for (const input of found) inputs.set(keyOf(instanceId, input.entry.step, input.entry.rollout_id), input)
  }))
  return rows.map((row) => {
    const data = row.data as { score?: unknown; analysis?: Analysis }
    const verdict = data.analysis?.reward_hacking
    const rolloutId = rolloutIdOf(row)
    const input = inputs.get(keyOf(row.instanceId, row.step, rolloutId))
    const output = input?.rollout.output ?? ''
    return {
      document_id: row.id,
      instance_id: row.instanceId,
      step: row.step,
      rollout_id: rolloutId,
      score: typeof data.score === 'number' ? data.score : null,
      severity: verdict?.severity ?? 'low',
      tactics: verdict?.tactics ?? [],
      evidence: verdict?.evidence ?? [],
      assessment: data.analysis?.overall_assessment ?? row.text,
      rollout: input ? { input: input.rollout.input, output: output.slice(0, ROLLOUT_EXCERPT_CHARS), truncated: output.length > ROLLOUT_EXCERPT_CHARS } : null,
    }
  })
}

async function llmCallGroups(db: D1Database, runId: string): Promise<LlmCallGroup[]> {
  return drizzle(db)
    .select({
      role: llmCalls.role,
      model: llmCalls.model,
      outcome: llmCalls.outcome,
      calls: sql<number>`count(*)`,
      mean_latency_ms: sql<number>`avg(${llmCalls.latencyMs})`,
      prompt_tokens: sql<number>`sum(${llmCalls.promptTokens})`,
      completion_tokens: sql<number>`sum(${llmCalls.completionTokens})`,
    })
    .from(llmCalls)
    .where(eq(llmCalls.runId, runId))
    .groupBy(llmCalls.role, llmCalls.model, llmCalls.outcome)
    .orderBy(llmCalls.role, llmCalls.model, llmCalls.outcome)
    .all()
}

/** The same reads as `GET /memory`, run-wide: a semantic search when there is a query, else the newest documents. */
async function memoryPage(env: Env, runId: string, request: MemoryRequest): Promise<(MemoryDocument & { similarity?: number })[]> {
  const memory = memoryFor(env, runId)
  if (request.q) return memory.search({ run_id: runId, text: request.q.slice(0, 2_000), top_k: MEMORY_PAGE, ...(request.kind ? { kinds: [request.kind] } : {}) })
  return memory.list({ run_id: runId, limit: MEMORY_PAGE, ...(request.kind ? { kind: request.kind } : {}) })
}

/** One deploy target: its active artifact and its history, newest first. */
export interface TargetSummary {
  target: string
  active: DeploymentRow
  history: DeploymentRow[]
}

/** A deploy record with what the dashboard shows of its artifact. */
export interface DeploymentRow {
  deploy_id: string
  artifact_id: string
  previous_artifact_id: string | null
  action: string
  deployed_by: string
  deployed_at: string
  llm_model: string | null
}

/** An artifact stored on this Worker. */
export interface ArtifactSummary {
  id: string
  kind: 'rubric' | 'library'
  /** What it holds: "4 rubrics", or a library's "3 entries (2 skills, 1 tool)". */
  contents: string
  backend: string
  source_run_id: string
  dataset_sha256: string
  created_at_utc: string
  stored_at: string
}

/**
 * Every deploy target with its active artifact and recent history, and the stored artifacts (newest first).
 * @example const { targets, artifacts } = await loadTargets(env.DB)
 */
export async function loadTargets(db: D1Database, historyPerTarget = 10): Promise<{ targets: TargetSummary[]; artifacts: ArtifactSummary[] }> {
  const orm = drizzle(db)
  const [targetRows, artifacts] = await Promise.all([
    orm.selectDistinct({ target: rmDeployments.target }).from(rmDeployments).orderBy(rmDeployments.target).limit(MAX_TARGETS).all(),
    orm.select().from(rmArtifacts).orderBy(desc(rmArtifacts.storedAt)).limit(MAX_ARTIFACTS).all(),
  ])
  const targets = await Promise.all(targetRows.map(async ({ target }) => {
    const history = (await listDeployments(db, target, historyPerTarget)).map((stored) => ({
      deploy_id: stored.deploy_id, artifact_id: stored.artifact_id, previous_artifact_id: stored.previous_artifact_id, action: stored.action,
      deployed_by: stored.deployed_by, deployed_at: stored.deployed_at, llm_model: stored.llm?.model ?? null,
    }))
    return { target, active: history[0]!, history }
  }))
  return {
    targets,
    artifacts: artifacts.map((row) => ({
      id: row.id, ...artifactContents(row.meta, row.rubricCount), backend: row.backend, source_run_id: row.sourceRunId,
      dataset_sha256: row.datasetSha256, created_at_utc: row.createdAtUtc, stored_at: row.storedAt,
    })),
  }
}

/** A stored artifact's kind and contents, from its `meta` (a library's entries travel there; a rubric artifact's rubrics are rows). */
function artifactContents(meta: unknown, rubricCount: number): Pick<ArtifactSummary, 'kind' | 'contents'> {
  const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`
  const { kind, entries } = (meta ?? {}) as { kind?: unknown; entries?: unknown }
  if (kind !== 'library' || !Array.isArray(entries)) return { kind: 'rubric', contents: plural(rubricCount, 'rubric') }
  const skills = entries.filter((entry: { kind?: unknown }) => entry.kind === 'skill').length
  return { kind: 'library', contents: `${plural(entries.length, 'entry', 'entries')} (${plural(skills, 'skill')}, ${plural(entries.length - skills, 'tool')})` }
}
