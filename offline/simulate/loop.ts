/**
 * The simulated RL training loop over the real API, as a trainer drives it: each step scores its
 * rollouts concurrently (bounded), closes the step, and — unless told not to — waits for the step's
 * rubric update; then it reads what the service says about the step (`/rubric_status`, `/rubrics`,
 * `/rubrics/history`, `/memory`). Timings of every phase are kept, for the step-blocking bench.
 */
import { startProgress } from '../progress/index.ts'
import pLimit from 'p-limit'
import { RewardClient } from '../../src/client/index.ts'
import type { RubricStatus, UpdateProgress } from '../../src/schemas/status.ts'
import { mean, quantile } from '../../src/stats/index.ts'
import {
  BEHAVIOURS,
  planStep,
  trainingStage,
  type Behaviour,
  type Question,
  type SimulatedRollout,
  type TrainingStage,
} from './scenario.ts'

export interface SimulationOptions {
  /** e.g. `http://127.0.0.1:8787` */
  baseUrl: string
  /** A run token (or the admin token); omit for the local default run. */
  token?: string
  /** Address the run by path (`/runs/:runId`); omit to use the token's run or the default run. */
  runId?: string
  steps: number
  rolloutsPerStep: number
  seed: number
  /** Most `/score` requests in flight at once (default 8). */
  concurrency?: number
  /**
   * Wait for each step's rubric update before the next step (default true). False is the AMARIS async
   * trainer: it closes the step and goes on; per-step flags and strategies are then read after the
   * last step's update.
   */
  wait?: boolean
  /** Longest wait for one step's update, in seconds (default 300). */
  waitTimeoutS?: number
  /** Read `/rubric_status`, `/rubrics`, `/rubrics/history` and `/memory` after each step (default true). */
  observe?: boolean
  /** Prefix of rollout ids (default `sim-<seed>-<random>`, so reruns on one run never collide). */
  idPrefix?: string
  /** Rollouts per question, as GRPO samples a group per prompt (default 1). */
  groupSize?: number
  /** Questions from a dataset (`loadDatasetQuestions`) instead of the generated arithmetic. */
  questions?: readonly Question[]
  /** Show each step's scoring on stderr (the shared progress display). */
  showProgress?: boolean
  /** Per-request timeout of the client, ms (default 180 000). */
  requestTimeoutMs?: number
  fetch?: typeof fetch
  /** Called as soon as a step's report is complete (in no-wait mode, before the backfill). */
  onStep?: (report: StepReport) => void
}

/** Scores of one behaviour in one step. */
interface BehaviourScores {
  n: number
  /** Mean score of the rollouts that were scored; null when none was. */
  mean: number | null
}

/**
 * What the rubric update of a step did, as `/rubrics/history` (or, for an unchanged set, `/rubric_status`) tells it.
 */
interface StepUpdate {
  strategy: string | null
  /** Whether the update created a new rubric version. */
  changed: boolean
  /** The version the update left in force. */
  rubric_version: number | null
  source: 'history' | 'status'
}

/** Wall times of one step's phases, in ms. */
interface StepTimings {
  /** From the first `/score` sent to the last answered: the trainer's scoring phase. */
  score: number
  /** Sum of the step's `/score` round trips (each measured on its own). */
  score_sum: number
  score_p50: number
  score_max: number
  complete: number
  /** `rubricUpdated()` long-poll; null when the trainer did not wait. */
  wait: number | null
  /** What the trainer was blocked for: score + complete (+ wait). */
  trainer: number
}

/** One simulated step, as printed and as written by `--json`. */
export interface StepReport {
  /** 0-based simulated step (the `current_step` sent with every rollout). */
  step: number
  stage: TrainingStage
  /** The server's step the rollouts were recorded in (differs from `step` on a run used before). */
  server_step: number | null
  counts: Record<Behaviour, number>
  scores: Record<Behaviour, BehaviourScores>
  mean_score: number | null
  /** `/score` requests that failed after the client's retries (their rollouts are not counted). */
  errors: number
  /** Highest rubric version the step's rollouts were scored on. */
  rubric_version_scored: number | null
  /** The rubric version after the step (after its update when the loop waited). */
  rubric_version: number | null
  /** `/rubric_status` status after the step: `updated` once its update is done. */
  status: string | null
  /** True when the wait for the update timed out. */
  update_timed_out: boolean
  /** Where a timed-out update had got, as `/rubric_status` said after the wait (its job's last heartbeat). */
  update_progress?: UpdateProgress
  /** Rollouts the analyzer flagged as reward hacking: `hacking_flags` of `/rubric_status` (after the wait). */
  hacking_flags: number | null
  hacking_flags_source: 'rubric_status' | 'memory' | null
  /**
   * Flagged analyses per behaviour, from `/memory?kind=analysis` (null when unreadable; the route returns at most 200
   * analyses per step).
   */
  flagged_by_behaviour: Record<Behaviour, number> | null
  update: StepUpdate | null
  timings_ms: StepTimings
}

export interface SimulationResult {
  base_url: string
  run_id: string | null
  seed: number
  steps: number
  rollouts_per_step: number
  concurrency: number
  waited: boolean
  started_at: string
  duration_ms: number
  reports: StepReport[]
  /** Adaptive and anchor rubrics at the end (global mode). */
  final_rubrics: { id: string; text: string; weight: number; is_anchor: boolean }[] | null
}

interface RubricsAnswer {
  run_id?: string
  rubric_version?: number
  anchor_rubrics?: { id: string; text: string; weight: number; is_anchor: boolean }[]
  adaptive_rubrics?: { id: string; text: string; weight: number; is_anchor: boolean }[]
  instances?: { instance_id: string; rubric_version: number }[]
}

interface HistoryAnswer {
  versions: { version: number; strategy: string | null; step: number | null }[]
}

interface MemoryAnswer {
  documents: { step: number; data: { rollout_id?: string; analysis?: { reward_hacking?: { flag?: boolean } } } }[]
}

/** What every step of one simulation shares. */
interface Simulation {
  options: SimulationOptions
  client: RewardClient
  getJson: ReturnType<typeof jsonReader>
  limit: ReturnType<typeof pLimit>
  wait: boolean
  observe: boolean
  waitTimeoutS: number
  /** The run, once known (from the options, a score answer or the status). */
  runId: string | null
  /** The rubric texts the next step's rollouts are written against (reward hacking stuffs their keywords). */
  rubricTexts: string[]
}

/**
 * Runs the simulated training loop against a running server and returns every step's report.
 * @example
 * const result = await runSimulation({ baseUrl: 'http://127.0.0.1:8787', steps: 5, rolloutsPerStep: 16, seed: 1 })
 * console.log(result.reports.map((r) => r.hacking_flags))
 */
export async function runSimulation(options: SimulationOptions): Promise<SimulationResult> {
  const startedAt = new Date()
  const started = performance.now()
  const simulation = await startSimulation(options)
  const idPrefix = options.idPrefix ?? `sim-${options.seed}-${Math.random().toString(36).slice(2, 8)}`
  const reports: StepReport[] = []
  const plans: SimulatedRollout[][] = []
  for (let step = 0; step < options.steps; step++) {
    const plan = planStep({
      seed: options.seed,
      step,
      totalSteps: options.steps,
      rolloutsPerStep: options.rolloutsPerStep,
      rubricTexts: simulation.rubricTexts,
      idPrefix,
      groupSize: options.groupSize ?? 1,
      ...(options.questions ? { questions: options.questions } : {}),
    })
    plans.push(plan)
    const report = await runStep(simulation, step, plan)
    reports.push(report)
    if (simulation.wait || !simulation.observe) options.onStep?.(report)
  }
  if (!simulation.wait && simulation.observe) await backfillUpdates(simulation, reports, plans)
  const finalRubrics = simulation.observe ? await simulation.client.rubrics().catch(() => ({}) as RubricsAnswer) : {}
  return {
    base_url: options.baseUrl,
    run_id: simulation.runId,
    seed: options.seed,
    steps: options.steps,
    rollouts_per_step: options.rolloutsPerStep,
    concurrency: options.concurrency ?? 8,
    waited: simulation.wait,
    started_at: startedAt.toISOString(),
    duration_ms: performance.now() - started,
    reports,
    final_rubrics: allRubrics(finalRubrics),
  }
}

/** The client, the request limit and the defaults of one simulation, with the rubrics in force at its start. */
async function startSimulation(options: SimulationOptions): Promise<Simulation> {
  const client = new RewardClient({
    baseUrl: options.baseUrl,
    ...(options.token ? { token: options.token } : {}),
    ...(options.runId ? { runId: options.runId } : {}),
    ...(options.requestTimeoutMs ? { timeoutMs: options.requestTimeoutMs } : {}),
    ...(options.fetch ? { fetch: options.fetch } : {}),
  })
  const observe = options.observe ?? true
  return {
    options,
    client,
    getJson: jsonReader(options),
    limit: pLimit(options.concurrency ?? 8),
    wait: options.wait ?? true,
    observe,
    waitTimeoutS: options.waitTimeoutS ?? 300,
    runId: options.runId ?? null,
    rubricTexts: observe ? rubricTextsOf(await client.rubrics().catch(() => ({}))) : [],
  }
}

/** One step: score its rollouts, close it, wait for its update (unless the trainer runs ahead), observe it. */
async function runStep(simulation: Simulation, step: number, plan: SimulatedRollout[]): Promise<StepReport> {
  const scoring = await scoreStep(simulation, step, plan)
  simulation.runId ??= scoring.scored[0]?.result.run_id ?? null
  const closing = await closeStep(simulation)
  const report = stepReport(simulation.options, step, plan, scoring, closing)
  if (simulation.observe) await observeStep(simulation, report, plan)
  return report
}

type ScoreAnswer = Awaited<ReturnType<RewardClient['scoreAsync']>>

/** The scoring phase of a step: what was scored, how many failed, and the round trips. */
interface StepScoring {
  scored: Array<{ behaviour: Behaviour; result: ScoreAnswer }>
  errors: number
  latencies: number[]
  ms: number
}

/** Scores the step's rollouts, at most `concurrency` in flight; fails only when every one of them failed. */
async function scoreStep(simulation: Simulation, step: number, plan: SimulatedRollout[]): Promise<StepScoring> {
  const { client, limit, options } = simulation
  const latencies: number[] = []
  const started = performance.now()
  const progress = options.showProgress
    ? startProgress({ label: `step ${step} scoring`, total: plan.length })
    : undefined
  const results = await Promise.all(
    plan.map((simulated) =>
      limit(async () => {
        const sent = performance.now()
        try {
          const result = await client.scoreAsync(simulated.rollout, simulated.metadata)
          return { simulated, result }
        } catch (error) {
          // A failed /score (after the client's retries) is not counted by the service; the step goes on without it.
          return { simulated, error: error instanceof Error ? error : new Error(String(error)) }
        } finally {
          latencies.push(performance.now() - sent)
          progress?.update(latencies.length)
        }
      }),
    ),
  ).finally(() => progress?.stop())
  const ms = performance.now() - started
  const scored = results.flatMap((entry) =>
    'result' in entry && entry.result ? [{ behaviour: entry.simulated.behaviour, result: entry.result }] : [],
  )
  if (scored.length === 0 && plan.length > 0) {
    const first = results.find((entry) => 'error' in entry) as { error: Error } | undefined
    throw new Error(`every /score of step ${step} failed: ${first?.error.message ?? 'unknown error'}`)
  }
  return { scored, errors: results.length - scored.length, latencies, ms }
}

/** Closes the step and, when the trainer waits, waits for its update; returns the times of both. */
async function closeStep(
  simulation: Simulation,
): Promise<{ completeMs: number; waitMs: number | null; timedOut: boolean }> {
  const completeStarted = performance.now()
  await simulation.client.rolloutsComplete()
  const completeMs = performance.now() - completeStarted
  if (!simulation.wait) return { completeMs, waitMs: null, timedOut: false }
  const waitStarted = performance.now()
  const updated = await simulation.client.rubricUpdated(simulation.waitTimeoutS)
  return { completeMs, waitMs: performance.now() - waitStarted, timedOut: updated.timed_out === true }
}

/** The step's report from its scoring and closing; what the service says about it is filled in by observeStep. */
function stepReport(
  options: SimulationOptions,
  step: number,
  plan: SimulatedRollout[],
  scoring: StepScoring,
  closing: { completeMs: number; waitMs: number | null; timedOut: boolean },
): StepReport {
  const { scored, latencies } = scoring
  const serverSteps = scored.map((entry) => entry.result.step)
  return {
    step,
    stage: trainingStage(step, options.steps),
    server_step: serverSteps.length ? Math.max(...serverSteps) : null,
    counts: countBy(plan.map((simulated) => simulated.behaviour)),
    scores: scoresByBehaviour(plan, scored),
    mean_score: mean(scored.map((entry) => entry.result.score)),
    errors: scoring.errors,
    rubric_version_scored: scored.length ? Math.max(...scored.map((entry) => entry.result.rubric_version)) : null,
    rubric_version: null,
    status: null,
    update_timed_out: closing.timedOut,
    hacking_flags: null,
    hacking_flags_source: null,
    flagged_by_behaviour: null,
    update: null,
    timings_ms: {
      score: scoring.ms,
      score_sum: latencies.reduce((sum, ms) => sum + ms, 0),
      score_p50: quantile(latencies, 0.5) ?? 0,
      score_max: Math.max(0, ...latencies),
      complete: closing.completeMs,
      wait: closing.waitMs,
      trainer: scoring.ms + closing.completeMs + (closing.waitMs ?? 0),
    },
  }
}

/** Fills in what the service says about the step: status, rubric version, and (after a wait) flags and update. */
async function observeStep(simulation: Simulation, report: StepReport, plan: SimulatedRollout[]): Promise<void> {
  const { client, getJson, wait } = simulation
  const [status, rubrics] = await Promise.all([
    client.rubricStatus(),
    client.rubrics().catch(() => ({}) as RubricsAnswer),
  ])
  simulation.runId ??= status.run_id
  const texts = rubricTextsOf(rubrics)
  if (texts.length > 0) simulation.rubricTexts = texts
  report.status = status.status
  report.rubric_version = versionOf(rubrics) ?? status.rubric_version
  const progress = status.instances.find((instance) => instance.progress)?.progress
  if (report.update_timed_out && progress) report.update_progress = progress
  if (!wait || report.server_step === null) return
  if (status.step === report.server_step) {
    report.hacking_flags = status.hacking_flags
    report.hacking_flags_source = 'rubric_status'
  }
  report.update = await updateOf(getJson, report.server_step, status)
  report.flagged_by_behaviour = await flaggedByBehaviour(getJson, report.server_step, plan)
}

/** No-wait mode: the updates of the last steps are still running; waits for all of them, then fills in each. */
async function backfillUpdates(
  simulation: Simulation,
  reports: StepReport[],
  plans: SimulatedRollout[][],
): Promise<void> {
  const { getJson } = simulation
  const status = await settle(simulation.client, simulation.waitTimeoutS)
  for (const [index, report] of reports.entries()) {
    if (report.server_step === null) continue
    report.update = await updateOf(getJson, report.server_step, status.step === report.server_step ? status : undefined)
    if (report.update?.rubric_version) report.rubric_version = report.update.rubric_version
    report.status = report.update ? 'updated' : report.status
    report.flagged_by_behaviour = await flaggedByBehaviour(getJson, report.server_step, plans[index]!)
    if (report.flagged_by_behaviour) {
      report.hacking_flags = BEHAVIOURS.reduce((sum, behaviour) => sum + report.flagged_by_behaviour![behaviour], 0)
      report.hacking_flags_source = 'memory'
    }
    simulation.options.onStep?.(report)
  }
}

/**
 * Waits until the updates of every closed step are done (or `timeoutS` passes) and returns the final
 * status. One `/rubric_status/wait` is not enough after steps closed without waiting: it answers once
 * the oldest updating step is done, so this waits again while a later one is still updating.
 * @example const status = await settle(client, 300) // status.status === 'updated' unless it timed out
 * @internal
 */
export async function settle(client: RewardClient, timeoutS: number): Promise<RubricStatus> {
  const deadline = Date.now() + timeoutS * 1_000
  for (;;) {
    const remaining = Math.max(1, Math.ceil((deadline - Date.now()) / 1_000))
    const answer = await client.rubricUpdated(remaining)
    if (answer.timed_out || Date.now() >= deadline) return client.rubricStatus()
    const status = await client.rubricStatus()
    if (status.status !== 'updating' && status.pending === 0) return status
  }
}

type JsonReader = <T>(path: string) => Promise<T | undefined>

/** GETs a path of the addressed run (the RewardClient has no /rubrics/history or /memory); undefined on any failure. */
function jsonReader(
  options: Pick<SimulationOptions, 'baseUrl' | 'token' | 'runId' | 'fetch' | 'requestTimeoutMs'>,
): JsonReader {
  const root = options.baseUrl.replace(/\/+$/, '')
  const base = options.runId ? `${root}/runs/${encodeURIComponent(options.runId)}` : root
  const fetchImpl = options.fetch ?? fetch
  return async <T>(path: string) => {
    try {
      const response = await fetchImpl(`${base}${path}`, {
        headers: { accept: 'application/json', ...(options.token ? { authorization: `Bearer ${options.token}` } : {}) },
        signal: AbortSignal.timeout(options.requestTimeoutMs ?? 30_000),
      })
      if (!response.ok) {
        await response.body?.cancel()
        return undefined
      }
      return (await response.json()) as T
    } catch {
      return undefined
    }
  }
}

/**
 * The update of `serverStep`: the version it created (history), else what `/rubric_status` says about an unchanged
 * update.
 */
async function updateOf(
  getJson: JsonReader,
  serverStep: number,
  status: RubricStatus | undefined,
): Promise<StepUpdate | null> {
  const history = await getJson<HistoryAnswer>('/rubrics/history')
  const version = history?.versions
    .filter((entry) => entry.step === serverStep)
    .sort((a, b) => b.version - a.version)[0]
  if (version) return { strategy: version.strategy, changed: true, rubric_version: version.version, source: 'history' }
  const outcomes = status?.instances.flatMap((instance) => (instance.update ? [instance.update] : [])) ?? []
  if (outcomes.length === 0) return null
  const changed = outcomes.find((outcome) => outcome.changed)
  const chosen = changed ?? outcomes[0]!
  return {
    strategy: chosen.strategy,
    changed: changed !== undefined,
    rubric_version: Math.max(...outcomes.map((outcome) => outcome.rubric_version)),
    source: 'status',
  }
}

/** Flagged analyses of the step's rollouts, per behaviour, from the run's memory. */
async function flaggedByBehaviour(
  getJson: JsonReader,
  serverStep: number,
  plan: readonly SimulatedRollout[],
): Promise<Record<Behaviour, number> | null> {
  const memory = await getJson<MemoryAnswer>(`/memory?kind=analysis&step=${serverStep}&limit=200`)
  if (!memory) return null
  const behaviourOf = new Map(plan.map((simulated) => [simulated.rollout.id, simulated.behaviour]))
  const flagged = countBy([])
  for (const document of memory.documents) {
    const behaviour = behaviourOf.get(String(document.data.rollout_id ?? ''))
    if (behaviour && document.data.analysis?.reward_hacking?.flag) flagged[behaviour]++
  }
  return flagged
}

function rubricTextsOf(answer: RubricsAnswer): string[] {
  return allRubrics(answer)?.map((rubric) => rubric.text) ?? []
}

function allRubrics(answer: RubricsAnswer): SimulationResult['final_rubrics'] {
  if (!answer.anchor_rubrics && !answer.adaptive_rubrics) return null
  return [...(answer.anchor_rubrics ?? []), ...(answer.adaptive_rubrics ?? [])].map(
    ({ id, text, weight, is_anchor }) => ({ id, text, weight, is_anchor }),
  )
}

function versionOf(answer: RubricsAnswer): number | undefined {
  if (answer.rubric_version !== undefined) return answer.rubric_version
  if (answer.instances?.length) return Math.max(...answer.instances.map((instance) => instance.rubric_version))
  return undefined
}

function countBy(behaviours: readonly Behaviour[]): Record<Behaviour, number> {
  const counts = Object.fromEntries(BEHAVIOURS.map((behaviour) => [behaviour, 0])) as Record<Behaviour, number>
  for (const behaviour of behaviours) counts[behaviour]++
  return counts
}

function scoresByBehaviour(
  plan: readonly SimulatedRollout[],
  scored: readonly { behaviour: Behaviour; result: { score: number } }[],
): Record<Behaviour, BehaviourScores> {
  const counts = countBy(plan.map((simulated) => simulated.behaviour))
  return Object.fromEntries(
    BEHAVIOURS.map((behaviour) => [
      behaviour,
      {
        n: counts[behaviour],
        mean: mean(scored.filter((entry) => entry.behaviour === behaviour).map((entry) => entry.result.score)),
      },
    ]),
  ) as Record<Behaviour, BehaviourScores>
}
