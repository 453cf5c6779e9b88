/**
 * Running any RL trainer under the harness, traceable in lineage: `prepare` (handshake with the target, optional
 * online run, manifest, env file), `run` (the trainer with that environment, its end recorded in a state file),
 * `finalize` (the result and metrics), `show` (the chain). `offline/cli/commands/train.ts` is the CLI over it.
 */
export { ENV, formatEnvFile, parseEnvFile, readEnvFile, shellQuote, stageEnvFile, type TrainEnv } from './env-file.ts'
export { EXIT_HANDSHAKE_REFUSED, HandshakeRefusedError } from './errors.ts'
export { finalizeTraining, judgeRun, type FinalizeOptions, type FinalizeOutcome } from './finalize.ts'
export { formatFinalize, formatPrepare, formatShow } from './format.ts'
export { flattenMetrics, parseMetricFlag, readMetricsFile, type MetricValues } from './metrics.ts'
export { createOnlineRun, CreatedRun, readOnlineRunRequest, type OnlineRunRequest } from './online-run.ts'
export {
  handshake,
  parseDatasetRef,
  prepareTraining,
  UNSPECIFIED,
  type PrepareOptions,
  type PrepareOutcome,
} from './prepare.ts'
export {
  durationSeconds,
  EXIT_CANNOT_RUN,
  EXIT_NOT_FOUND,
  runTrainer,
  type RunOptions,
  type RunOutcome,
} from './run.ts'
export { showTraining, type ShowOptions, type ShowOutcome } from './show.ts'
export { clearState, readState, statePath, TrainerRun, TrainState, writeState } from './state.ts'
export { describeStore, resolveStore, type TrainStoreFlags } from './store.ts'
