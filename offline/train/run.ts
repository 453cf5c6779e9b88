/**
 * `train run`: start the trainer (no shell) with the environment plus the env file, pass its output through, and
 * record its start, end and exit status in the state file, so `train finalize` knows how it ended even when it is
 * run later or elsewhere.
 */
import { spawn } from 'node:child_process'
import { constants, hostname } from 'node:os'
import type { CliIo } from '../cli/program.ts'
import { ENV, readEnvFile } from './env-file.ts'
import { readState, statePath, type TrainerRun, writeState } from './state.ts'
import { UsageError } from '../../src/usage-error/index.ts'

/** The exit code when the command does not exist (as a shell reports it). */
const EXIT_NOT_FOUND = 127
/** The exit code when the command exists but cannot be run (permissions, not an executable). */
const EXIT_CANNOT_RUN = 126

/** The flags of `train run`. */
export interface RunOptions {
  envFile: string
  /** The trainer command: the program, then its arguments. */
  command: string[]
  /**
   * `inherit` gives the trainer this process's terminal (progress bars, unbuffered logs); a CliIo receives its output.
   */
  output: 'inherit' | CliIo
  /** The environment the env file's variables are added to. */
  env: NodeJS.ProcessEnv
  now?: () => Date
}

/** How the trainer ended, as recorded. */
export interface RunOutcome extends TrainerRun {
  training_run_id: string
  exit_code: number
  ended_at: string
  duration_s: number
  state_file: string
}

/**
 * Runs the trainer to its end and records it; resolves with its exit code (128 + n for signal n, 127 or 126 when it
 * could not be started), never rejects for the trainer's own failure.
 * @example const { exit_code } = await runTrainer({ envFile: 'grpo-7.env', command: ['python3', 'train.py'], output:
 *   'inherit', env: process.env })
 */
export async function runTrainer(options: RunOptions): Promise<RunOutcome> {
  const [program, ...args] = options.command
  if (!program)
    throw new UsageError('give the trainer command after --, e.g. train run --env-path grpo-7.env -- python3 train.py')
  const fileEnv = readEnvFile(options.envFile)
  const trainingRunId = fileEnv[ENV.trainingRunId]!
  const previous = readState(options.envFile, trainingRunId)
  if (previous?.finalized_at)
    throw new UsageError(
      `training run "${trainingRunId}" is already finalized (${statePath(options.envFile)}): prepare a new training ` +
        `run`,
    )
  const now = options.now ?? (() => new Date())
  const token = fileEnv[ENV.token]
  const run: TrainerRun = {
    command: options.command.map((arg) => (token ? arg.replaceAll(token, '***') : arg)),
    started_at: now().toISOString(),
    harness_pid: process.pid,
    host: hostname(),
  }
  writeState(options.envFile, { training_run_id: trainingRunId, run })

  const ended = await spawnTrainer(program, args, { ...options.env, ...fileEnv }, options.output)
  const finished: TrainerRun = { ...run, ended_at: now().toISOString(), ...ended }
  writeState(options.envFile, { training_run_id: trainingRunId, run: finished })
  return {
    ...finished,
    training_run_id: trainingRunId,
    exit_code: ended.exit_code,
    ended_at: finished.ended_at!,
    duration_s: durationSeconds(finished),
    state_file: statePath(options.envFile),
  }
}

/**
 * Seconds from a run's start to its end, to the millisecond.
 * @example durationSeconds({ command: [], started_at: '2026-01-01T00:00:00.000Z', ended_at: '2026-01-01T00:00:01.500Z'
 *   }) // 1.5
 */
export function durationSeconds(run: TrainerRun): number {
  return Math.max(0, Date.parse(run.ended_at ?? run.started_at) - Date.parse(run.started_at)) / 1000
}

type Ended = { exit_code: number; signal?: string; spawn_error?: string }

function spawnTrainer(
  program: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  output: RunOptions['output'],
): Promise<Ended> {
  return new Promise((resolve) => {
    const child = spawn(program, args, { env, stdio: output === 'inherit' ? 'inherit' : ['inherit', 'pipe', 'pipe'] })
    if (output !== 'inherit') {
      child.stdout?.setEncoding('utf8').on('data', (text: string) => output.out(text))
      child.stderr?.setEncoding('utf8').on('data', (text: string) => output.err(text))
    }
    // A terminal's Ctrl-C reaches the trainer by itself (same process group); this process only has to outlive it to
    // record the end. TERM and HUP are sent to this process alone (a scheduler, a closed session), so they are passed
    // on.
    const forward = (signal: NodeJS.Signals) => () => void child.kill(signal)
    const handlers: Array<[NodeJS.Signals, () => void]> = [
      ['SIGINT', () => {}],
      ['SIGTERM', forward('SIGTERM')],
      ['SIGHUP', forward('SIGHUP')],
    ]
    let started = false
    const settle = (ended: Ended) => {
      for (const [signal, handler] of handlers) process.off(signal, handler)
      resolve(ended)
    }
    child.once('spawn', () => {
      started = true
      for (const [signal, handler] of handlers) process.on(signal, handler)
    })
    child.once('error', (error: NodeJS.ErrnoException) => {
      if (started) return
      const exitCode = error.code === 'ENOENT' ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN
      settle({
        exit_code: exitCode,
        spawn_error: `cannot start "${program}": ${error.code === 'ENOENT' ? 'command not found' : error.message}`,
      })
    })
    child.once('close', (code, signal) => {
      if (!started) return
      settle(signal ? { exit_code: 128 + (constants.signals[signal] ?? 0), signal } : { exit_code: code ?? 1 })
    })
  })
}
