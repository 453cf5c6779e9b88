/**
 * Running any RL trainer under the harness, traceable in lineage: `prepare` (handshake with the target, optional
 * online run, manifest, env file), `run` (the trainer with that environment, its end recorded in a state file),
 * `finalize` (the result and metrics), `show` (the chain). `offline/cli/commands/train.ts` is the CLI over it.
 */

export { finalizeTraining } from './finalize.ts'
export { formatFinalize, formatPrepare, formatShow } from './format.ts'

export { prepareTraining } from './prepare.ts'
export { runTrainer } from './run.ts'
export { showTraining } from './show.ts'
