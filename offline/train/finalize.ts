/**
 * `train finalize`: the training run's result from what `train run` recorded (succeeded on exit 0; failed at stage
 * "training" on another exit, a signal or a trainer that could not start; canceled when stopped by SIGINT or SIGTERM;
 * failed at stage "preflight" when it was never run) plus its metrics, recorded in lineage. The finish time comes from
 * the recorded end (or the first finalize), so finalizing twice records the identical result once.
 */
import { hostname } from 'node:os'
import { LINEAGE_SCHEMA_VERSION, TrainingRunResult } from '../../src/lineage/schemas.ts'
import { withBackend } from '../lineage/backend.ts'
import { ENV, readEnvFile } from './env-file.ts'
import { type MetricValues, parseMetricFlag, readMetricsFile } from './metrics.ts'
import { durationSeconds } from './run.ts'
import { readState, type TrainState, writeState } from './state.ts'
import { describeStore, resolveStore, type TrainStoreFlags } from './store.ts'
import { UsageError } from '../../src/usage-error/index.ts'

/** Signals that mean someone stopped the run on purpose. */
const CANCEL_SIGNALS = new Set(['SIGINT', 'SIGTERM'])

/** The flags of `train finalize`. */
export interface FinalizeOptions extends TrainStoreFlags {
  envFile: string
  metricsFile?: string
  /** `name=value` pairs; they override the file's values of the same name. */
  metric?: string[]
  now?: () => Date
}

/** What finalize recorded, and anything the user should know about it. */
export interface FinalizeOutcome {
  result: TrainingRunResult
  /** False when the identical result was already recorded. */
  stored: boolean
  lineage: string
  notes: string[]
}

/**
 * How a run ended, from its state: the status and, unless it succeeded, why.
 * @example judgeRun({ training_run_id: 'g', run: { command: ['x'], started_at: t0, ended_at: t1, exit_code: 7 } },
 *   'g.env') // { status: 'failed', failure: { stage: 'training', … } }
 */
function judgeRun(state: TrainState | undefined, envFile: string): Pick<TrainingRunResult, 'status' | 'failure'> {
  const run = state?.run
  if (!run)
    return {
      status: 'failed',
      failure: {
        stage: 'preflight',
        message: `the trainer was never run: no \`train run\` is recorded for ${envFile}`,
      },
    }
  if (run.ended_at === undefined || run.exit_code === undefined) {
    return {
      status: 'failed',
      failure: {
        stage: 'training',
        message:
          `the trainer's end was not recorded: \`train run\` started it at ${run.started_at} and stopped ` +
          `before it ended`,
      },
    }
  }
  if (run.spawn_error)
    return { status: 'failed', failure: { stage: 'training', message: `${run.spawn_error} (exit ${run.exit_code})` } }
  if (run.signal) {
    return {
      status: CANCEL_SIGNALS.has(run.signal) ? 'canceled' : 'failed',
      failure: { stage: 'training', message: `the trainer was stopped by ${run.signal} (exit ${run.exit_code})` },
    }
  }
  if (run.exit_code !== 0)
    return {
      status: 'failed',
      failure: { stage: 'training', message: `the trainer exited with code ${run.exit_code}` },
    }
  return { status: 'succeeded' }
}

/**
 * Builds the result and records it in the lineage store the env file names (or the flags).
 * @example const { result } = await finalizeTraining({ envFile: 'grpo-7.env', metricsFile: 'out/metrics.json' })
 */
export async function finalizeTraining(options: FinalizeOptions): Promise<FinalizeOutcome> {
  const env = readEnvFile(options.envFile)
  const trainingRunId = env[ENV.trainingRunId]!
  const flagMetrics = Object.fromEntries((options.metric ?? []).map(parseMetricFlag))
  const store = resolveStore(options, env)
  const state = readState(options.envFile, trainingRunId)
  refuseWhileRunning(state)
  const verdict = judgeRun(state, options.envFile)
  const notes: string[] = []

  let fileMetrics: MetricValues = {}
  if (options.metricsFile !== undefined) {
    const read = readMetricsFile(options.metricsFile, verdict.status !== 'succeeded')
    if (read) fileMetrics = read
    else
      notes.push(`${options.metricsFile} does not exist (the trainer did not write it); recorded without its metrics`)
  }
  const run = state?.run
  const harness: MetricValues =
    run?.exit_code === undefined
      ? {}
      : { exit_code: run.exit_code, ...(run.ended_at ? { duration_s: durationSeconds(run) } : {}) }
  const finalizedAt = state?.finalized_at ?? (options.now?.() ?? new Date()).toISOString()
  const result = TrainingRunResult.parse({
    schema_version: LINEAGE_SCHEMA_VERSION,
    run_id: trainingRunId,
    ...verdict,
    metrics: { ...fileMetrics, ...flagMetrics, ...harness },
    finished_at: run?.ended_at ?? finalizedAt,
  })
  const outcome = await withBackend(store, (backend) => backend.recordResult(result), '--lineage-url')
  writeState(options.envFile, { ...(state ?? { training_run_id: trainingRunId }), finalized_at: finalizedAt })
  return { result, stored: outcome.stored, lineage: describeStore(store), notes }
}

/** A run whose end is not recorded may still be going: finalizing it now would record a failure for good. */
function refuseWhileRunning(state: TrainState | undefined): void {
  const run = state?.run
  if (!run || run.ended_at !== undefined || run.harness_pid === undefined || run.host !== hostname()) return
  let alive = true
  try {
    process.kill(run.harness_pid, 0)
  } catch (error) {
    alive = (error as NodeJS.ErrnoException).code === 'EPERM'
  }
  if (alive)
    throw new UsageError(
      `training run "${state!.training_run_id}" is still running (\`train run\` is process ${run.harness_pid}): ` +
        `finalize it when it ends`,
    )
}
