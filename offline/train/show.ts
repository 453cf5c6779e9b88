/**
 * `train show`: a training run's chain (artifact → deployment → training run → result → evals) from lineage, plus
 * what the state file knows of its trainer when the env file is given (a run not finalized yet shows there).
 */
import { resolveRunRef, RUN_NOT_RECORDED } from '../../src/lineage/compare.ts'
import type { LineageChain } from '../../src/lineage/schemas.ts'
import { withBackend } from '../lineage/backend.ts'
import { ENV, readEnvFile, type TrainEnv } from './env-file.ts'
import { readState, type TrainerRun } from './state.ts'
import { resolveStore, type TrainStoreFlags } from './store.ts'
import { UsageError } from '../../src/usage-error/index.ts'

/** The flags of `train show`. */
export interface ShowOptions extends TrainStoreFlags {
  /** A training run id, or "latest"; default the env file's run, else "latest". */
  ref?: string
  envFile?: string
}

/** The chain, and the trainer as `train run` recorded it (null without an env file or a run). */
export interface ShowOutcome {
  chain: LineageChain
  trainer: TrainerRun | null
}

/**
 * Loads the chain. "latest" here is the training run started last, with or without evals (`lineage`'s "latest" asks
 * for evals, which a run just trained rarely has).
 * @example const { chain } = await showTraining({ ref: 'grpo-7' })
 */
export async function showTraining(options: ShowOptions): Promise<ShowOutcome> {
  const env: TrainEnv | undefined = options.envFile === undefined ? undefined : readEnvFile(options.envFile)
  const ref = options.ref ?? env?.[ENV.trainingRunId] ?? 'latest'
  const chain = await withBackend(
    resolveStore(options, env),
    async (backend) => {
      if (ref !== 'latest') return resolveRunRef(backend, ref)
      const [newest] = await backend.listRuns({ limit: 1 })
      if (!newest) throw new UsageError('"latest": no training run is recorded', { code: RUN_NOT_RECORDED })
      return resolveRunRef(backend, newest.run_id)
    },
    '--lineage-url',
  )
  const state = options.envFile && env ? readState(options.envFile, chain.run_id) : undefined
  return { chain, trainer: state?.run ?? null }
}
