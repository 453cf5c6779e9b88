/**
 * `reward-harness simulate` (also `npm run simulate -- …`): a simulated RL training loop against a running
 * Reward Harness, AMARIS-style. The work is in offline/simulate (loaded only when the command runs).
 */
import { Command, CommanderError } from 'commander'
import { UsageError } from '../../../src/usage-error/index.ts'
import { type SimulateOptions, simulateOptions } from '../../simulate/options.ts'
import type { CliContext } from '../program.ts'
import { structuredOutputOption } from '../llm-options.ts'

const HELP_AFTER = `
Each step scores K arithmetic word-problem rollouts concurrently (correct, wrong, verbose, sycophantic
and reward-hacking answers, in a mix that shifts over the training stages), calls POST /complete,
waits for the step's rubric update (GET /rubric_status/wait), then reads /rubric_status, /rubrics,
/rubrics/history and /memory and prints one table row. A summary closes the run. Under --json the
table goes to stderr and stdout carries the results alone.

Table columns: mean score per behaviour (with its count), the step's mean, the rubric version the
step was scored on → the version after its update, flags = rollouts the analyzer flagged as reward
hacking (hacking_flags of /rubric_status; the mock analyzer also flags sycophancy and padded answers
that score well), and the update's strategy (from /rubrics/history, else /rubric_status).

Examples:
  npm start   # in another terminal: serves http://127.0.0.1:8787 on the mock backend
  npm run simulate -- --steps 5 --create-run
  npm run simulate -- --url http://127.0.0.1:8787 --steps 10 --rollouts-per-step 32 --seed 7 --json > sim.json
  npm run simulate -- --create-run --judge-base-url http://127.0.0.1:8000/v1 --judge-model Qwen/Qwen3-8B`

/**
 * The `simulate` command's flags on `command` (the registered command, or a bare one for parsing alone).
 * @example defineSimulateFlags(new Command('simulate')).parse(['--steps', '3'], { from: 'user' })
 */
export function defineSimulateFlags(command: Command): Command {
  return command
    .description('simulated RL training loop against a running Reward Harness (AMARIS-style)')
    .option('--url <url>', 'server base URL (default http://127.0.0.1:$PORT, 8787 without PORT, as npm start)')
    .option('--token <token>', 'run token (or REWARD_HARNESS_TOKEN); omit for the local default run')
    .option('--run-id <id>', 'address run <id> as /runs/<id>; with --create-run, the id to create')
    .option('--create-run', 'create a fresh run through POST /runs (admin) and use its token, so runs share no state')
    .option(
      '--admin-token <token>',
      'admin token for --create-run (else REWARD_HARNESS_ADMIN_TOKEN, else ADMIN_TOKEN from .dev.vars)',
    )
    .option('--judge-base-url <url>', 'with --create-run: an OpenAI-compatible endpoint for every agent')
    .option('--judge-model <model>', 'with --create-run: the model name at that endpoint')
    .option('--judge-api-key-env <name>', "with --create-run: name of the Worker secret holding the endpoint's key")
    .addOption(structuredOutputOption(undefined, { flag: '--judge-structured-output', endpoint: '--judge-base-url' }))
    .option('--judge-concurrency <n>', "with --create-run: each role's calls at a time (a llama.cpp server's slots)")
    .option(
      '--judge-timeout-ms <ms>',
      'with --create-run: timeout of each call (a queued call waits in it; default 60000)',
    )
    .option('--judging <grades|verdicts>', 'with --create-run: how the scorer grades (verdicts: Yes/No per criterion)')
    .option('--archive', 'with --create-run: the run archives every scored rollout to R2 (what distill reads)')
    .option(
      '--questions <file>',
      'prompts with a right and a wrong answer from a chosen/rejected JSONL with references (gsm8k-solutions)',
    )
    .option('--steps <n>', 'training steps (default 5)')
    .option('--rollouts-per-step <k>', 'rollouts scored per step (default 16)')
    .option('--group-size <g>', 'rollouts per question, as GRPO samples a group per prompt (default 1)')
    .option('--concurrency <c>', 'most /score requests in flight (default 8)')
    .option('--seed <s>', 'seed of questions, behaviours and answers (default 1)')
    .option('--no-wait', "do not wait for each step's update before the next step (the AMARIS async trainer)")
    .option('--wait-timeout <seconds>', "longest wait for one step's update, seconds (default 300)")
    .option('--out <file>', 'also write the JSON results to <file>')
    .addHelpText('after', HELP_AFTER)
}

/**
 * Parses a `simulate` command line on its own (flags after `simulate`); a wrong flag is a UsageError.
 * @example parseSimulateArgs(['--steps', '3', '--create-run'], {}).steps // 3
 */
export function parseSimulateArgs(argv: readonly string[], env: Record<string, string | undefined>): SimulateOptions {
  const command = defineSimulateFlags(new Command('simulate'))
    .option('--json', 'print the results as JSON on stdout')
    .exitOverride()
    .configureOutput({ writeErr: () => undefined, writeOut: () => undefined })
  try {
    command.parse([...argv], { from: 'user' })
  } catch (error) {
    if (error instanceof CommanderError) throw new UsageError(error.message.replace(/^error: /, ''))
    throw error
  }
  return simulateOptions(command.opts(), env)
}

/**
 * Adds `simulate` to the program.
 * @example register(program, cli) // then: reward-harness simulate --steps 5 --create-run
 */
export function register(program: Command, cli: CliContext): void {
  defineSimulateFlags(program.command('simulate')).action(async (_flags: unknown, command: Command) => {
    const { simulate } = await import('../../simulate/command.ts')
    const options = simulateOptions(command.optsWithGlobals(), process.env)
    const say = (line: string) => (options.json ? cli.io.err(`${line}\n`) : cli.io.out(`${line}\n`))
    await simulate(options, { say, json: cli.io.out }, process.env, [
      ...givenFlags(command),
      ...(options.json ? ['--json'] : []),
    ])
  })
}

/** The flags given on the command line (not defaults), for the `command` field of the JSON output. */
function givenFlags(command: Command): string[] {
  return command.options.flatMap((option) => {
    const name = option.attributeName()
    if (command.getOptionValueSource(name) !== 'cli' || !option.long) return []
    const value: unknown = command.getOptionValue(name)
    return typeof value === 'string' ? [option.long, value] : [option.long]
  })
}
