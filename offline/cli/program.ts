/**
 * The CLI's framework: the root program with its global options, what a command module provides,
 * and how output is printed (text, or JSON under `--json`); failures become exit codes in ./failures.ts.
 */
import { allowInsecureHttp } from '../edge/index.ts'
import { Command, CommanderError } from 'commander'
import { nearestName } from '../../src/text/index.ts'
import { EXIT_OK, reportFailure } from './failures.ts'

export { CliExit, EXIT_FAILURE } from './failures.ts'

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

/** What every command gets besides its own arguments. */
export interface CliContext {
  io: CliIo
  /**
   * True when the program is built only to list the commands (the root `--help`, `--version`, a command line naming
   * no command): a command may then leave out flags that are costly to build (search's, read off a zod schema).
   */
  listing: boolean
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
 * action to the root program. Register it in `offline/cli/index.ts` with one line. Its top-level imports load with
 * the root `--help` (every module does): what only the action needs is imported in the action.
 * @example
 * export function register(program: Command, cli: CliContext): void {
 *   program.command('hello').description('say hello').action((_options, command: Command) => cli.print(command, {
 * hello: 'world' }, 'hello, world')) }
 */
export interface CliCommandModule {
  register(program: Command, cli: CliContext): void | Promise<void>
}

/**
 * The root program, with the global options (`--json`, `--version`), its output routed to `io`, and
 * commander's exits turned into exceptions (so runCli decides the exit code). Settings are inherited by
 * every command added afterwards.
 * @example createProgram(processIo, { version: '0.1.0', jsonErrors: false }).command('datasets')
 */
function createProgram(io: CliIo, options: { version: string; jsonErrors: boolean }): Command {
  return new Command('reward-harness')
    .description('Reward Harness: rubric search, benchmarks and artifacts for rubric-based reward models.')
    .version(options.version, '-V, --version', 'print the version')
    .option('--json', 'print machine-readable JSON on stdout (errors as JSON on stderr)')
    .option(
      '--allow-insecure-http',
      'send the admin token over plain http:// to a host that is not this machine (anyone on the path can read it)',
    )
    .hook('preAction', (_program, action) => allowInsecureHttp(action.optsWithGlobals().allowInsecureHttp === true))
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
 * @example (await buildProgram([datasets], processIo, { version: '0.1.0' })).commands.map((command) => command.name())
 *   // ['datasets', …]
 * @internal
 */
export async function buildProgram(
  modules: readonly CliCommandModule[],
  io: CliIo,
  options: { version: string; jsonErrors?: boolean; listing?: boolean },
): Promise<Command> {
  const program = createProgram(io, { version: options.version, jsonErrors: options.jsonErrors ?? false })
  const cli: CliContext = {
    io,
    listing: options.listing ?? false,
    json: (command) => Boolean(command.optsWithGlobals().json),
    print(command, value, text) {
      io.out(
        this.json(command) ? `${JSON.stringify(value, null, 2)}\n` : `${typeof text === 'function' ? text() : text}\n`,
      )
    },
  }
  for (const module of modules) await module.register(program, cli)
  return program
}

/**
 * Runs the CLI on `argv` (the arguments after the program name) with the given command modules and
 * returns the exit code; it never calls `process.exit`. `listing`: see {@link CliContext.listing}.
 * @example process.exitCode = await runCli(['datasets', 'validate', 'examples/demo.json'], [datasets], processIo,
 *   { version: '0.1.0' })
 */
export async function runCli(
  argv: readonly string[],
  modules: readonly CliCommandModule[],
  io: CliIo,
  options: { version: string; listing?: boolean },
): Promise<number> {
  const end = argv.indexOf('--')
  const jsonErrors = (end === -1 ? argv : argv.slice(0, end)).includes('--json')
  const program = await buildProgram(modules, io, { ...options, jsonErrors })
  try {
    await program.parseAsync([...argv], { from: 'user' })
    return EXIT_OK
  } catch (error) {
    // Commander checks required options before unknown ones: `--datset x` would only hear that --dataset is missing.
    if (error instanceof CommanderError && error.code === 'commander.missingMandatoryOptionValue' && !jsonErrors) {
      const hint = misspeltOption(program, argv)
      if (hint) io.err(`${hint}\n`)
    }
    return reportFailure(error, io.err, jsonErrors)
  }
}

/**
 * A "did you mean" for the first option on the command line that the command it names does not know, if one of its
 * options is a likely spelling.
 * @example misspeltOption(program, ['search', '--datset', 'x']) // '(Did you mean --dataset? "--datset" is not an
 *   option of search)'
 */
function misspeltOption(program: Command, argv: readonly string[]): string | undefined {
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
    const best = nearestName(
      flag,
      known.filter((name) => name.startsWith('--')),
    )
    if (best) return `(Did you mean ${best}? "${flag}" is not an option of ${command.name()})`
  }
  return undefined
}
