/**
 * The state file beside an env file (`<env-path>.state.json`, mode 0600): what `train run` saw of the trainer (start,
 * end, exit code or signal, or why it could not start) and the finish time `train finalize` settled on, so a second
 * finalize rebuilds the identical result.
 */
import { existsSync, readFileSync, rmSync } from 'node:fs'
import writeFileAtomic from 'write-file-atomic'
import { z } from 'zod'
import { UsageError } from '../../src/usage-error/index.ts'

/** One `train run`: `ended_at` is absent while the trainer runs (or if the harness itself was killed). */
export const TrainerRun = z.object({
  /** The command, with the run token masked. */
  command: z.array(z.string()),
  started_at: z.string(),
  ended_at: z.string().optional(),
  /** The trainer's own exit status, or 128 + n for signal n, 127 / 126 when it could not be started. */
  exit_code: z.number().int().optional(),
  signal: z.string().optional(),
  /** Why the command could not be started. */
  spawn_error: z.string().optional(),
  /** Which `train run` process watches the trainer, so finalize can tell a run still going from one cut short. */
  harness_pid: z.number().int().optional(),
  host: z.string().optional(),
})
export type TrainerRun = z.infer<typeof TrainerRun>

/** The whole state file. */
export const TrainState = z.object({
  training_run_id: z.string(),
  run: TrainerRun.optional(),
  /** Set by the first `train finalize` when nothing else fixes the finish time (no run, or no recorded end). */
  finalized_at: z.string().optional(),
})
export type TrainState = z.infer<typeof TrainState>

/**
 * Where an env file's state lives.
 * @example statePath('runs/grpo-7.env') // 'runs/grpo-7.env.state.json'
 */
export function statePath(envFile: string): string {
  return `${envFile}.state.json`
}

/**
 * The state of a training run, or undefined when `train run` never wrote one. A state left by another training run
 * (the env file was prepared again) counts as none.
 * @example const state = readState('train.env', 'grpo-7')
 */
export function readState(envFile: string, trainingRunId: string): TrainState | undefined {
  const file = statePath(envFile)
  if (!existsSync(file)) return undefined
  let parsed: TrainState
  try {
    parsed = TrainState.parse(JSON.parse(readFileSync(file, 'utf8')))
  } catch (error) {
    throw new UsageError(`${file} is not a train state file: ${(error as Error).message.slice(0, 300)}`)
  }
  return parsed.training_run_id === trainingRunId ? parsed : undefined
}

/**
 * Writes the state atomically with mode 0600.
 * @example writeState('train.env', { training_run_id: 'grpo-7', run: { command: ['python3', 'train.py'], started_at:
 *   new Date().toISOString() } })
 */
export function writeState(envFile: string, state: TrainState): void {
  const file = statePath(envFile)
  writeFileAtomic.sync(file, `${JSON.stringify(TrainState.parse(state), null, 2)}\n`, { mode: 0o600 })
}

/**
 * Removes an env file's state (a new `train prepare` starts a new training run).
 * @example clearState('train.env')
 */
export function clearState(envFile: string): void {
  rmSync(statePath(envFile), { force: true })
}
