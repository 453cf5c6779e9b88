/**
 * The CLI's framework: the root program with its global options, what a command module provides,
 * how output is printed (text, or JSON under `--json`), and how failures become exit codes:
 * 0 ok, 2 bad input (a DatasetError, a CliUsageError, a flag commander refuses), 1 anything else.
 */
import { Command, CommanderError } from 'commander'
import { DatasetError } from '../../src/datasets/index.ts'

/** Where the CLI writes; the process's streams, or buffers in tests. */
export interface CliIo {
  out(text: string): void
  err(text: string): void
}

/** The process's stdout and stderr. */
export const processIo: CliIo = {
  out: (text) => void process.stdout.write(text),
  err: (text) => void process.stderr.write(text),
}

export const EXIT_OK = 0
export const EXIT_FAILURE = 1
export const EXIT_BAD_INPUT = 2

/**
 * Bad flags or arguments that a command finds itself (commander already catches unknown options and
 * missing arguments): exit code 2, the message on stderr.
 * @example throw new CliUsageError('--out: convert writes autosr JSON; give a .json file')
 */
export class CliUsageError extends Error {
  override name = 'CliUsageError'
}

/**
 * Ends a command with a given exit code (e.g. 3 for "regressions found"), printing `message` to stderr if given.
 * @example throw new CliExit(3, 'regression: accuracy fell 6.2%')
 */
export class CliExit extends Error {
  override name = 'CliExit'
  constructor(
    readonly exitCode: number,
    message = '',
  ) {
    super(message)
  }
}

/** What every command gets besides its own arguments. */
export interface CliContext {
  io: CliIo
  /** True when `--json` was given (anywhere on the command line). */
  json(command: Command): boolean
  /**
   * Prints a command's result: `value` as indented JSON under `--json`, otherwise `text` (a newline is added).
   * @example cli.print(command, summary, () => `${summary.prompts} prompts`)
   */
  print(command: Command, value: unknown, text: string | (() => string)): void
}

/**
 * A command module (`offline/cli/commands/<name>.ts`): it adds its command, subcommands, options and
 * action to the root program. Register it in `offline/cli/index.ts` with one line.
 * @example
 * export function register(program: Command, cli: CliContext): void {
 *   program.command('hello').description('say hello').action((_options, command: Command) => cli.print(command, { hello: 'world' }, 'hello, world'))
 * }
 */
export interface CliCommandModule {
  register(program: Command, cli: CliContext): void
}

/**
 * The root program, with the global options (`--json`, `--version`), its output routed to `io`, and
 * commander's exits turned into exceptions (so runCli decides the exit code). Settings are inherited by
 * every command added afterwards.
 * @example createProgram(processIo, { version: '0.1.0', jsonErrors: false }).command('datasets')
 */
export function createProgram(io: CliIo, options: { version: string; jsonErrors: boolean }): Command {
  return new Command('reward-harness')
    .description('Reward Harness: rubric search, benchmarks and artifacts for rubric-based reward models.')
    .version(options.version, '-V, --version', 'print the version')
    .option('--json', 'print machine-readable JSON on stdout (errors as JSON on stderr)')
    .helpCommand('help [command]', 'show help for a command')
    .showHelpAfterError(!options.jsonErrors && '(add --help for usage)')
    .exitOverride()
    .configureOutput({
      writeOut: io.out,
      // Under --json, stderr carries only the JSON error runCli writes.
      writeErr: (text) => (options.jsonErrors ? undefined : io.err(text)),
      outputError: (text, write) => (options.jsonErrors ? undefined : write(text)),
    })
}

/**
 * The root program with every command module registered: what runCli parses, and what a test walks
 * to check every command's help.
 * @example buildProgram([datasets], processIo, { version: '0.1.0' }).commands.map((command) => command.name()) // ['datasets', …]
 */
export function buildProgram(
  modules: readonly CliCommandModule[],
  io: CliIo,
  options: { version: string; jsonErrors?: boolean },
): Command {
  const program = createProgram(io, { version: options.version, jsonErrors: options.jsonErrors ?? false })
  const cli: CliContext = {
    io,
    json: (command) => Boolean(command.optsWithGlobals().json),
    print(command, value, text) {
      io.out(
        this.json(command) ? `${JSON.stringify(value, null, 2)}\n` : `${typeof text === 'function' ? text() : text}\n`,
      )
    },
  }
  for (const module of modules) module.register(program, cli)
  return program
}

/**
 * Runs the CLI on `argv` (the arguments after the program name) with the given command modules and
 * returns the exit code; it never calls `process.exit`.
 * @example process.exitCode = await runCli(['datasets', 'validate', 'examples/demo.json'], [datasets], processIo, '0.1.0')
 */
export async function runCli(
  argv: readonly string[],
  modules: readonly CliCommandModule[],
  io: CliIo,
  version: string,
): Promise<number> {
  const end = argv.indexOf('--')
  const jsonErrors = (end === -1 ? argv : argv.slice(0, end)).includes('--json')
  const program = buildProgram(modules, io, { version, jsonErrors })
  try {
    await program.parseAsync([...argv], { from: 'user' })
    return EXIT_OK
  } catch (error) {
    // Commander checks required options before unknown ones: `--datset x` would only hear that --dataset is missing.
    if (error instanceof CommanderError && error.code === 'commander.missingMandatoryOptionValue' && !jsonErrors) {
      const hint = misspeltOption(program, argv)
      if (hint) io.err(`${hint}\n`)
    }
    return reportFailure(error, io, jsonErrors)
  }
}

/**
 * A "did you mean" for the first option on the command line that the command it names does not know, if one of its
 * options is a likely spelling.
 * @example misspeltOption(program, ['search', '--datset', 'x']) // '(Did you mean --dataset? "--datset" is not an option of search)'
 */
export function misspeltOption(program: Command, argv: readonly string[]): string | undefined {
  let command = program
  for (const arg of argv) {
    const sub = command.commands.find((candidate) => candidate.name() === arg || candidate.aliases().includes(arg))
    if (!sub) break
    command = sub
  }
  const known = [...command.options, ...program.options]
    .flatMap((option) => [option.long, option.short])
    .filter((flag): flag is string => Boolean(flag))
  const end = argv.indexOf('--')
  for (const arg of end === -1 ? argv : argv.slice(0, end)) {
    const flag = arg.split('=')[0]!
    if (!flag.startsWith('--') || known.includes(flag)) continue
    const [best] = known
      .filter((name) => name.startsWith('--'))
      .map((name) => ({ name, distance: editDistance(flag, name) }))
      .sort((a, b) => a.distance - b.distance)
    if (best && best.distance <= Math.max(2, Math.floor(flag.length / 4)))
      return `(Did you mean ${best.name}? "${flag}" is not an option of ${command.name()})`
  }
  return undefined
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++)
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1))
    previous = current
  }
  return previous[b.length]!
}

function reportFailure(error: unknown, io: CliIo, jsonMode: boolean): number {
  if (error instanceof CommanderError) {
    // Help and version end with 0; every other commander exit is a usage error, already printed in text mode.
    if (error.exitCode === 0) return EXIT_OK
    const message =
      error.code === 'commander.help' ? 'no command given; see --help' : error.message.replace(/^error: /, '')
    if (jsonMode) writeJsonError(io, { kind: 'bad_input', code: error.code, message })
    return EXIT_BAD_INPUT
  }
  if (error instanceof CliExit) {
    if (error.message)
      io.err(
        jsonMode
          ? `${JSON.stringify({ error: { kind: 'exit', code: 'exit', message: error.message } })}\n`
          : `${error.message}\n`,
      )
    return error.exitCode
  }
  if (error instanceof DatasetError) {
    if (jsonMode)
      writeJsonError(io, { kind: 'bad_input', code: 'invalid_dataset', message: error.message, issues: error.issues })
    else
      io.err(
        error.issues.length > 1
          ? `error: ${error.issues.length} problems:\n${indent(error.message)}\n`
          : `error: ${error.message}\n`,
      )
    return EXIT_BAD_INPUT
  }
  const message = error instanceof Error ? error.message : String(error)
  const badInput = error instanceof CliUsageError
  if (jsonMode)
    writeJsonError(io, {
      kind: badInput ? 'bad_input' : 'failure',
      code: badInput ? 'usage' : errorName(error),
      message,
    })
  else
    io.err(
      `error: ${message}\n${!badInput && process.env.REWARD_HARNESS_DEBUG && error instanceof Error ? `${error.stack}\n` : ''}`,
    )
  return badInput ? EXIT_BAD_INPUT : EXIT_FAILURE
}

function writeJsonError(io: CliIo, error: { kind: string; code: string; message: string; issues?: unknown }): void {
  io.err(`${JSON.stringify({ error })}\n`)
}

function errorName(error: unknown): string {
  return error instanceof Error ? error.name : 'unknown'
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((line) => `  ${line}`)
    .join('\n')
}
