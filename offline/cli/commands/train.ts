/**
 * `reward-harness train prepare | run | finalize | show`: run any RL trainer under the harness, traceable in lineage
 * (artifact → deployment → training run → result → evals). The work is in offline/train, loaded only when a command
 * runs.
 */
import type { Command } from 'commander'
import { storeOptions } from '../../lineage/backend.ts'
import { CliExit, type CliContext, processIo } from '../program.ts'

const HELP = `
The flow:
  prepare   checks the target (GET /rm/<target>/healthz must say "ok" and, with --expect-artifact, name that
            artifact), creates the online run (--online-run, POST /runs), records the training-run manifest in
            lineage and writes the env file (mode 600). A refused check writes and records nothing.
  run       starts the trainer given after -- (no shell) with the env file's variables added to the environment,
            passes its output through and records start, end and exit status in <env-path>.state.json.
  finalize  records the result: succeeded on exit 0; failed at stage "training" on another exit, a signal, or a
            command that could not start; canceled when stopped by SIGINT/SIGTERM; failed at stage "preflight" when
            \`train run\` never ran. Metrics: the --metrics file's numbers (nested objects flattened with "."), the
            --metric flags, and exit_code and duration_s. Finalizing again with the same inputs changes nothing.
  show      prints the chain artifact → deployment → training run → result → evals (with --env-path, the trainer's
            recorded run too). "latest" = the training run started last.

The env file (--env-path; KEY='value' lines, so a shell loads it too: set -a; . ./train.env; set +a):
  REWARD_HARNESS_URL              the edge's base URL
  REWARD_HARNESS_TOKEN            the online run's token; without --online-run, $RM_TOKEN when set, else absent
  REWARD_HARNESS_RUN_ID           the online run's id (with --online-run)
  REWARD_HARNESS_TARGET, REWARD_HARNESS_ARTIFACT_ID, REWARD_HARNESS_DEPLOY_ID, REWARD_HARNESS_TRAINING_RUN_ID
  REWARD_HARNESS_LINEAGE_DB       the lineage SQLite file, absolute (or REWARD_HARNESS_LINEAGE_URL with --lineage-url),
                                  so run, finalize and show use the store prepare recorded in, from any directory
The flag is --env-path, not --env-file: Node 20 takes --env-file for itself wherever it appears on a command line.

The admin token is read from REWARD_HARNESS_ADMIN_TOKEN (prepare; and --lineage-url). No token is ever printed.
Unset --trainer and --model are recorded as "unspecified", an unset --dataset as "unspecified@unspecified".

Exit codes: 0 ok; 1 failure (the edge unreachable, a 5xx); 2 refused input (a flag, a file that is not JSON, an
unknown target, a name already recorded, a conflicting result, an edge 4xx); 3 handshake refused (the target is not
healthy or serves another artifact than --expect-artifact). \`train run\` exits with the trainer's exit code
(128 + n when signal n stopped it; 127 when the command is not found, 126 when it cannot be run).

Examples:
  export REWARD_HARNESS_ADMIN_TOKEN=…
  reward-harness train prepare --url https://rm.example.com --target prod --name grpo-7 --env-path grpo-7.env \\
      --expect-artifact rm_… --online-run configs/online.json --trainer verl --model qwen2.5-7b --dataset gsm8k@v3
  reward-harness train run --env-path grpo-7.env -- python3 -m verl.trainer.main_ppo …
  reward-harness train finalize --env-path grpo-7.env --metrics out/metrics.json --metric final_loss=0.41
  reward-harness train show grpo-7`

const SEE_TRAIN = '\nThe flow, the env file and the exit codes: reward-harness train --help'

interface StoreFlags {
  db?: string
  lineageUrl?: string
}

interface PrepareFlags extends StoreFlags {
  url: string
  target: string
  name: string
  envPath: string
  expectArtifact?: string
  onlineRun?: string
  trainer?: string
  model?: string
  dataset?: string
}

/**
 * Adds `train` and its subcommands to the program.
 * @example register(program, cli) // then: reward-harness train show grpo-7
 */
export function register(program: Command, cli: CliContext): void {
  if (program.commands.some((command) => command.name() === 'train')) return
  const train = program
    .command('train')
    .description('run an RL trainer under the harness: prepare → run → finalize → show, recorded in lineage')
    .addHelpText('after', HELP)

  registerTrainPrepare(train, cli)
  registerTrainRun(train, cli)
  registerTrainFinalize(train, cli)
  registerTrainShow(train, cli)
}

/** `train prepare`: checks, handshake, online run, manifest and env file. */
function registerTrainPrepare(train: Command, cli: CliContext): void {
  storeOptions(
    train
      .command('prepare')
      .description('check the target, create the online run, record the manifest, write the env file')
      .requiredOption('--url <edge>', "the edge's base URL, e.g. https://rm.example.com")
      .requiredOption('--target <name>', 'the deployment target the trainer is scored by')
      .requiredOption(
        '--name <training-run-id>',
        'the training run id in lineage (and the online run id unless its config names one)',
      )
      .requiredOption('--env-path <file>', 'where to write the environment for the trainer (mode 600)')
      .option('--expect-artifact <id>', 'refuse (exit 3) unless the target serves this artifact')
      .option(
        '--online-run <config.json>',
        'create an online run from this config ({config}, {run_id, config} or a bare config)',
      )
      .option('--trainer <name>', 'the trainer, e.g. verl, openrlhf, trl, slime (default "unspecified")')
      .option('--model <name>', 'the policy model (default "unspecified")')
      .option('--dataset <id@version>', 'the training dataset (default "unspecified@unspecified")')
      .addHelpText('after', SEE_TRAIN),
    '--lineage-url',
  ).action(async (flags: PrepareFlags, command: Command) => {
    const { formatPrepare, prepareTraining } = await import('../../train/index.ts')
    const outcome = await prepareTraining({ ...flags, envFile: flags.envPath, env: process.env })
    cli.print(command, outcome, () => formatPrepare(outcome))
  })
}

/** `train run`: the trainer under the env file's environment, and how it ended. */
function registerTrainRun(train: Command, cli: CliContext): void {
  train
    .command('run')
    .description("run the trainer with the env file's environment and record how it ended")
    .requiredOption('--env-path <file>', 'the env file written by train prepare')
    .argument('<command...>', 'the trainer command, after --')
    .addHelpText(
      'after',
      `\nExample: reward-harness train run --env-path grpo-7.env -- python3 train.py --epochs 1${SEE_TRAIN}`,
    )
    .action(async (commandLine: string[], flags: { envPath: string }, command: Command) => {
      const { runTrainer } = await import('../../train/index.ts')
      const json = cli.json(command)
      // The terminal itself when this is the real CLI: trainers keep their progress bars and unbuffered logs.
      const output = cli.io === processIo ? 'inherit' : cli.io
      const outcome = await runTrainer({
        envFile: flags.envPath,
        command: commandLine,
        output,
        env: process.env,
      })
      if (outcome.spawn_error)
        throw new CliExit(
          outcome.exit_code,
          `error: ${outcome.spawn_error} (exit ${outcome.exit_code}; recorded in ${outcome.state_file})`,
        )
      if (!json)
        cli.io.err(
          `train run: ${outcome.training_run_id}: the trainer ` +
            `${outcome.signal ? `was stopped by ${outcome.signal}` : `exited with code ${outcome.exit_code}`} after ` +
            `${outcome.duration_s} s (recorded in ${outcome.state_file})\n`,
        )
      if (outcome.exit_code !== 0) throw new CliExit(outcome.exit_code)
    })
}

/** `train finalize`: the run's result and metrics into lineage. */
function registerTrainFinalize(train: Command, cli: CliContext): void {
  storeOptions(
    train
      .command('finalize')
      .description("record the training run's result and metrics in lineage")
      .requiredOption('--env-path <file>', 'the env file written by train prepare')
      .option(
        '--metrics <file.json>',
        'a JSON object of metrics the trainer wrote (numbers; nested objects flattened with ".")',
      )
      .option('--metric <name=value...>', 'a metric; repeatable, overrides the file')
      .addHelpText('after', SEE_TRAIN),
    '--lineage-url',
  ).action(async (flags: StoreFlags & { envPath: string; metrics?: string; metric?: string[] }, command: Command) => {
    const { finalizeTraining, formatFinalize } = await import('../../train/index.ts')
    const outcome = await finalizeTraining({ ...flags, envFile: flags.envPath, metricsFile: flags.metrics })
    cli.print(command, outcome, () => formatFinalize(outcome))
  })
}

/** `train show`: a training run's chain. */
function registerTrainShow(train: Command, cli: CliContext): void {
  storeOptions(
    train
      .command('show')
      .description("print a training run's chain: artifact → deployment → training run → result → evals")
      .argument('[training-run-id]', 'a training run id or "latest" (default: the env file\'s run, else latest)')
      .option(
        '--env-path <file>',
        'the env file written by train prepare (its run, its store, and the recorded trainer run)',
      )
      .addHelpText('after', SEE_TRAIN),
    '--lineage-url',
  ).action(async (ref: string | undefined, flags: StoreFlags & { envPath?: string }, command: Command) => {
    const { formatShow, showTraining } = await import('../../train/index.ts')
    const outcome = await showTraining({
      ...flags,
      envFile: flags.envPath,
      ...(ref === undefined ? {} : { ref }),
    })
    cli.print(command, { ...outcome.chain, trainer: outcome.trainer }, () => formatShow(outcome))
  })
}
