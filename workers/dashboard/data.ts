/**
 * What the dashboard reads, all of it already stored by the API: D1 (runs, memory, deployments) and the Durable
 * Objects' own read methods (status, the per-step aggregates of the timeline, LLM call sums, rubric history).
 * Nothing here writes.
 */
import { redactUrl } from '../../src/credentials/index.ts'
import { and, desc, eq, sql } from 'drizzle-orm'
import { drizzle } from 'drizzle-orm/d1'
import type { RubricVersionRecord, StepHealthRecord } from '../../durable-objects/rubric-instance/index.ts'
import type { StepTimelineEntry } from '../../durable-objects/run-coordinator/index.ts'
import { pLimit } from '../../src/llm/index.ts'
import { memoryDocuments, rmArtifacts, rmDeployments, runs } from '../../src/db/schema.ts'
import type { Analysis } from '../../src/schemas/agents.ts'
import type { MemoryDocument, MemoryKind } from '../../src/schemas/memory.ts'
import { RunConfig } from '../../src/schemas/run-config.ts'
import { parseStored } from '../../src/schemas/strict.ts'
import type { RubricStatus } from '../../src/schemas/status.ts'
import type { Env, Principal } from '../env.ts'
import { listDeployments } from '../artifacts/store.ts'
import { memoryFor } from '../memory/backends.ts'
import { DEFAULT_RUN_ID, loadRunConfig } from '../../durable-objects/run-config.ts'
import { objects } from '../objects/call.ts'

/** Runs the index lists at most (newest first). */
const MAX_LISTED_RUNS = 200
/** Steps whose score distributions are drawn one histogram each. */
export const HISTOGRAM_STEPS = 6
/** Coordinators the runs index asks at once. */
const ACTIVITY_FAN_OUT = 16
/** Flagged analyses shown, newest first. */
const MAX_HACKING_FLAGS = 25
/** Closed steps of criterion health the run page charts. */
const HEALTH_STEPS_SHOWN = 50
/** Deploy targets and stored artifacts the targets page lists at most. */
const MAX_TARGETS = 100
const MAX_ARTIFACTS = 100
/** Memory documents the browser shows per page. */
const MEMORY_PAGE = 15

/** One row of the runs index. */
export interface RunSummary {
  id: string
  created_at: string | null
  mode: RunConfig['mode']
  rubrics_mode: RunConfig['rubrics_mode']
  access: RunConfig['access']
  scores: number
  last_step: number | null
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
        : await orm
            .select()
            .from(runs)
            .where(sql`json_extract(${runs.config}, '$.access') = 'open'`)
            .orderBy(desc(runs.createdAt))
            .limit(MAX_LISTED_RUNS)
            .all()
  const listed: { id: string; created_at: string | null; config: RunConfig }[] = created.map((row) => ({
    id: row.id,
    created_at: row.createdAt,
    config: parseStored(RunConfig, row.config),
  }))
  const defaultConfig = (await loadRunConfig(env.DB, DEFAULT_RUN_ID))!
  const seesDefault =
    viewer.kind === 'admin' || (viewer.kind === 'anonymous' && (local || defaultConfig.access === 'open'))
  if (seesDefault) listed.unshift({ id: DEFAULT_RUN_ID, created_at: null, config: defaultConfig })
  if (listed.length === 0) return []
  const limit = pLimit(ACTIVITY_FAN_OUT)
  return Promise.all(
    listed.map(({ id, created_at, config }) =>
      limit(async () => {
        const activity = await objects.coordinator(env, id, (coordinator) => coordinator.activity())
        // Under local development the default run is open whatever its config says (as the API treats it).
        const access = id === DEFAULT_RUN_ID && local ? 'open' : config.access
        return {
          id,
          created_at,
          mode: config.mode,
          rubrics_mode: config.rubrics_mode,
          access,
          scores: activity.scores,
          last_step: activity.last_step,
        }
      }),
    ),
  )
}

/** Scores of one step: each rollout's first score (repeated requests left out: they repeat it). */
export interface StepScores {
  step: number
  count: number
  mean: number
  min: number
  max: number
  min_version: number
  max_version: number
  /** Rollouts per tenth of the score range, [0, 0.1) … [0.9, 1]. */
  bins: number[]
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
  /** An excerpt of the rollout as scored, kept with its analysis. */
  rollout: { input: string; output: string; truncated: boolean } | null
}

/** LLM calls of the run by role, model and outcome. */
interface LlmCallGroup {
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
  /** Criterion health of the shown instance's newest closed steps (oldest first). */
  health: StepHealthRecord[]
  stepScores: StepScores[]
  hacking: HackingFlag[]
  llmCalls: LlmCallGroup[]
  memory: { request: MemoryRequest; documents: (MemoryDocument & { similarity?: number })[] }
}

/**
 * Reads the run page's data in parallel: DO status, timeline (with each step's score tally), LLM call sums and rubric
 * history, flagged analyses, and the memory page (a semantic search when `memory.q` is given).
 * @example const data = await loadRunDashboard(env, run, { instance: 'global', memory: { q: 'hacking' } })
 */
export async function loadRunDashboard(
  env: Env,
  run: { id: string; config: RunConfig },
  options: { instance?: string; memory: MemoryRequest; spendSearch?: () => Promise<void> },
): Promise<RunDashboard> {
  const [status, timeline, instances, calls] = await Promise.all([
    objects.coordinator(env, run.id, (coordinator) => coordinator.status()),
    objects.coordinator(env, run.id, (coordinator) => coordinator.timeline()),
    objects.coordinator(env, run.id, (coordinator) => coordinator.instances()),
    objects.coordinator(env, run.id, (coordinator) => coordinator.llmCalls()),
  ])
  const instanceId =
    run.config.rubrics_mode === 'global'
      ? 'global'
      : (instances.find((instance) => instance.instance_id === options.instance)?.instance_id ??
        instances[0]?.instance_id ??
        null)
  const history: Promise<RubricVersionRecord[]> =
    instanceId === null
      ? Promise.resolve([])
      : objects.instance(env, { runId: run.id, instanceId }, (instance) => instance.history())
  const health: Promise<StepHealthRecord[]> =
    instanceId === null
      ? Promise.resolve([])
      : objects.instance(env, { runId: run.id, instanceId }, (instance) => instance.health(HEALTH_STEPS_SHOWN))
  const [versions, healthRows, hacking, memory] = await Promise.all([
    history,
    health,
    hackingFlags(env, run.id),
    memoryPage(env, run.id, options.memory, options.spendSearch),
  ])
  const llmCalls = calls.map(({ latency_ms, ...group }) => ({
    ...group,
    model: redactUrl(group.model),
    mean_latency_ms: group.calls ? latency_ms / group.calls : 0,
  }))
  return {
    run,
    status,
    timeline,
    instances,
    instanceId,
    history: versions,
    health: healthRows,
    stepScores: scoresByStep(timeline),
    hacking,
    llmCalls,
    memory: { request: options.memory, documents: memory },
  }
}

function scoresByStep(timeline: readonly StepTimelineEntry[]): StepScores[] {
  return timeline.flatMap(({ step, tally }) =>
    tally.rollouts === 0
      ? []
      : [
          {
            step,
            count: tally.rollouts,
            mean: tally.score_sum / tally.rollouts,
            min: tally.score_min ?? 0,
            max: tally.score_max ?? 0,
            min_version: tally.min_version ?? 1,
            max_version: tally.max_version ?? 1,
            bins: tally.bins,
          },
        ],
  )
}

async function hackingFlags(env: Env, runId: string): Promise<HackingFlag[]> {
  const rows = await drizzle(env.DB)
    .select()
    .from(memoryDocuments)
    .where(
      and(
        eq(memoryDocuments.runId, runId),
        eq(memoryDocuments.kind, 'analysis'),
        sql`json_extract(${memoryDocuments.data}, '$.analysis.reward_hacking.flag') = 1`,
      ),
    )
    .orderBy(desc(memoryDocuments.step), desc(memoryDocuments.createdAt))
    .limit(MAX_HACKING_FLAGS)
    .all()
  return rows.map((row) => {
    const data = row.data as {
      rollout_id?: unknown
      score?: unknown
      analysis?: Analysis
      rollout?: HackingFlag['rollout']
    }
    const verdict = data.analysis?.reward_hacking
    return {
      document_id: row.id,
      instance_id: row.instanceId,
      step: row.step,
      rollout_id: typeof data.rollout_id === 'string' ? data.rollout_id : (row.subject ?? ''),
      score: typeof data.score === 'number' ? data.score : null,
      severity: verdict?.severity ?? 'low',
      tactics: verdict?.tactics ?? [],
      evidence: verdict?.evidence ?? [],
      assessment: data.analysis?.overall_assessment ?? row.text,
      rollout: data.rollout ?? null,
    }
  })
}

/**
 * The same reads as `GET /memory`, run-wide: a semantic search when there is a query (spending what `GET /memory?q=`
 * spends), else the newest documents.
 */
async function memoryPage(
  env: Env,
  runId: string,
  request: MemoryRequest,
  spendSearch?: () => Promise<void>,
): Promise<(MemoryDocument & { similarity?: number })[]> {
  const memory = memoryFor(env, runId)
  if (request.q)
    return memory.search(
      { run_id: runId, text: request.q, top_k: MEMORY_PAGE, ...(request.kind ? { kinds: [request.kind] } : {}) },
      spendSearch,
    )
  return memory.list({ run_id: runId, limit: MEMORY_PAGE, ...(request.kind ? { kind: request.kind } : {}) })
}

/** One deploy target: its active artifact and its history, newest first. */
export interface TargetSummary {
  target: string
  active: DeploymentRow
  history: DeploymentRow[]
}

/** A deploy record with what the dashboard shows of its artifact. */
interface DeploymentRow {
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
export async function loadTargets(
  db: D1Database,
  historyPerTarget = 10,
): Promise<{ targets: TargetSummary[]; artifacts: ArtifactSummary[] }> {
  const orm = drizzle(db)
  const [targetRows, artifacts] = await Promise.all([
    orm
      .selectDistinct({ target: rmDeployments.target })
      .from(rmDeployments)
      .orderBy(rmDeployments.target)
      .limit(MAX_TARGETS)
      .all(),
    orm.select().from(rmArtifacts).orderBy(desc(rmArtifacts.storedAt)).limit(MAX_ARTIFACTS).all(),
  ])
  const targets = await Promise.all(
    targetRows.map(async ({ target }) => {
      const history = (await listDeployments(db, target, historyPerTarget)).map((stored) => ({
        deploy_id: stored.deploy_id,
        artifact_id: stored.artifact_id,
        previous_artifact_id: stored.previous_artifact_id,
        action: stored.action,
        deployed_by: stored.deployed_by,
        deployed_at: stored.deployed_at,
        llm_model: stored.llm?.model ?? null,
      }))
      return { target, active: history[0]!, history }
    }),
  )
  return {
    targets,
    artifacts: artifacts.map((row) => ({
      id: row.id,
      ...artifactContents(row.meta, row.rubricCount),
      backend: row.backend,
      source_run_id: row.sourceRunId,
      dataset_sha256: row.datasetSha256,
      created_at_utc: row.createdAtUtc,
      stored_at: row.storedAt,
    })),
  }
}

/**
 * A stored artifact's kind and contents, from its `meta` (a library's entries travel there; a rubric artifact's rubrics
 * are rows).
 */
function artifactContents(meta: unknown, rubricCount: number): Pick<ArtifactSummary, 'kind' | 'contents'> {
  const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`
  const { kind, entries } = (meta ?? {}) as { kind?: unknown; entries?: unknown }
  if (kind !== 'library' || !Array.isArray(entries)) return { kind: 'rubric', contents: plural(rubricCount, 'rubric') }
  const skills = entries.filter((entry: { kind?: unknown }) => entry.kind === 'skill').length
  return {
    kind: 'library',
    contents:
      `${plural(entries.length, 'entry', 'entries')} ` +
      `(${plural(skills, 'skill')}, ${plural(entries.length - skills, 'tool')})`,
  }
}
