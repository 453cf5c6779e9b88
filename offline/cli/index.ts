/**
 * `reward-harness`: the offline CLI. Each command lives in its own module (`commands/<name>.ts`,
 * exporting `register(program, cli)`, see CliCommandModule) and is listed once in COMMANDS below;
 * only the module a command line asks for is loaded. The `reward-harness` bin runs its build (./main.ts, ./build.ts);
 * `npx tsx offline/cli/index.ts …` runs the sources.
 */
import { realpathSync } from 'node:fs'
import { pathToFileURL } from 'node:url'
import packageJson from '../../package.json'
import { type CliCommandModule, type CliIo, EXIT_FAILURE, processIo, runCli } from './program.ts'

/** Every command: one line each, `name: () => import('./commands/<name>.ts')`, in the order help lists them. */
const COMMANDS = {
  datasets: () => import('./commands/datasets.ts'),
  search: () => import('./commands/search.ts'),
  evolve: () => import('./commands/evolve.ts'),
  export: () => import('./commands/export.ts'),
  import: () => import('./commands/import.ts'),
  bench: () => import('./commands/bench.ts'),
  distill: () => import('./commands/distill.ts'),
  deploy: () => import('./commands/deploy.ts'),
  rollback: () => import('./commands/deploy.ts'),
  deployments: () => import('./commands/deploy.ts'),
  lineage: () => import('./commands/lineage.ts'),
  train: () => import('./commands/train.ts'),
  report: () => import('./commands/report.ts'),
  simulate: () => import('./commands/simulate.ts'),
} satisfies Record<string, () => Promise<CliCommandModule>>

/**
 * The command a command line names, if any.
 * @example requestedCommand(['--json', 'datasets', 'validate', 'x.json']) // 'datasets'
 */
function requestedCommand(argv: readonly string[]): keyof typeof COMMANDS | undefined {
  return argv.find((arg) => Object.hasOwn(COMMANDS, arg)) as keyof typeof COMMANDS | undefined
}

/**
 * The command modules a command line needs: the one it names, or all of them (for help, or an unknown command).
 * @example (await loadCommands(['datasets', 'validate', 'x.json'])).length // 1
 */
export async function loadCommands(argv: readonly string[] = []): Promise<CliCommandModule[]> {
  const requested = requestedCommand(argv)
  const loaders = requested ? [COMMANDS[requested]] : Object.values(COMMANDS)
  return Promise.all(loaders.map((load) => load()))
}

/** The version `--version` prints. */
export const VERSION: string = packageJson.version

/**
 * Runs the CLI on `argv` (the arguments after the program name) and returns the exit code:
 * 0 ok, 2 bad input, 1 other failures.
 * @example process.exitCode = await main(['datasets', 'validate', 'examples/demo.json', '--json'])
 */
export async function main(argv: readonly string[] = process.argv.slice(2), io: CliIo = processIo): Promise<number> {
  let modules: CliCommandModule[]
  try {
    modules = await loadCommands(argv)
  } catch (error) {
    io.err(`error: cannot load the command: ${error instanceof Error ? error.message : String(error)}\n`)
    return EXIT_FAILURE
  }
  // A command line naming no command only lists them: see CliContext.listing.
  return runCli(argv, modules, io, { version: VERSION, listing: requestedCommand(argv) === undefined })
}

/**
 * True when `moduleUrl` is the script node was started with.
 * @example if (isEntryPoint(import.meta.url)) process.exitCode = await main()
 */
function isEntryPoint(moduleUrl: string): boolean {
  const script = process.argv[1]
  if (!script) return false
  try {
    return pathToFileURL(realpathSync(script)).href === moduleUrl
  } catch {
    return false
  }
}

if (isEntryPoint(import.meta.url)) {
  void main().then((code) => {
    process.exitCode = code
  })
}
