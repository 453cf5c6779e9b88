/**
 * `reward-harness deploy | rollback | deployments`: put an RM artifact on an edge target through the admin API, roll a
 * target back, list a target's deployments. The work is in offline/deploy (loaded only when a command runs). This one
 * module registers all three commands (index.ts lists it under each name; registering twice is a no-op).
 */
import type { Command } from 'commander'
import type { StructuredOutput } from '../../../src/schemas/structured-output.ts'
import { structuredOutputOption } from '../llm-options.ts'
import type { CliContext } from '../program.ts'

const COMMON_HELP = `
The admin token is read from REWARD_HARNESS_ADMIN_TOKEN (the edge's ADMIN_TOKEN); without it the command exits 2.
Requests answered 429 or 503 are retried with exponential backoff (Retry-After honoured); nothing else is retried.

Exit codes: 0 done; 1 failure (the edge unreachable, a 5xx, still 429/503 after the retries, an unexpected answer);
2 refused input (a flag, a missing token, an invalid artifact, or an edge 4xx such as 400 invalid_artifact — shown
with its details — or 409 nothing_to_roll_back).`

const DEPLOY_HELP = `
Steps: the artifact file is validated locally (the schema, and artifact_id = the hash of its content, so a file edited
after export is refused before anything is sent), uploaded (POST /admin/artifacts; "already stored" when the edge has
it), then activated on the target (POST /admin/targets/<target>/deployments). An autosr artifact is converted first,
exactly as \`reward-harness import --from autosr\` converts it (refused with every problem named if it cannot be).
The deploy record is printed: a table, or the record as JSON under --json. /rm/<target>/score then scores with the
artifact's rubric for the request's prompt_id (its "__default__" for unknown prompts).
${COMMON_HELP}

Examples:
  export REWARD_HARNESS_ADMIN_TOKEN=…
  reward-harness deploy --artifact out/rm.json --target prod --url https://rm.example.com
  reward-harness deploy --artifact out/rm.json --target staging --url http://127.0.0.1:8787 --deployed-by ci \\
      --llm-base-url https://api.openai.com/v1 --llm-model gpt-4o-mini --llm-api-key-env OPENAI_API_KEY --json`

interface EdgeFlags {
  target: string
  url: string
}

interface DeployFlags extends EdgeFlags {
  artifact: string
  deployedBy?: string
  llmBaseUrl?: string
  llmModel?: string
  llmApiKeyEnv?: string
  llmStructuredOutput?: StructuredOutput
}

/**
 * Adds `deploy`, `rollback` and `deployments` to the program (once, however often it is called).
 * @example register(program, cli) // then: reward-harness deploy --artifact out/rm.json --target prod --url
 *   https://rm.example.com
 */
export function register(program: Command, cli: CliContext): void {
  if (program.commands.some((command) => command.name() === 'deploy')) return

  registerDeploy(program, cli)
  registerRollback(program, cli)
  registerDeployments(program, cli)
}

/** `deploy`: validate, upload and activate an artifact on a target. */
function registerDeploy(program: Command, cli: CliContext): void {
  program
    .command('deploy')
    .description('validate an RM artifact, upload it to the edge and make it the active artifact of a target')
    .requiredOption('--artifact <file>', 'the artifact JSON written by `reward-harness export` (or an autosr artifact)')
    .requiredOption('--target <name>', 'the target to deploy to (its RM surface is /rm/<target>/…)')
    .requiredOption('--url <url>', "the edge's base URL, e.g. https://rm.example.com")
    .option('--deployed-by <name>', 'who deploys, recorded with the deployment (default: $USER)')
    .option('--llm-base-url <url>', 'the OpenAI-compatible judge the target scores with (any artifact)')
    .option(
      '--llm-model <model>',
      "the judge model there (default: the artifact's verifier model; required for a mock-searched artifact)",
    )
    .option('--llm-api-key-env <name>', "the name of the edge's secret holding the API key (a name, never the key)")
    .addOption(structuredOutputOption(undefined))
    .addHelpText('after', DEPLOY_HELP)
    .action(async (options: DeployFlags, command: Command) => {
      const { deployArtifact, deployedBy, llmOf } = await import('../../deploy/run.ts')
      const { formatDeploy } = await import('../../deploy/format.ts')
      const json = cli.json(command)
      const result = await (async () => {
        const llm = llmOf(options)
        const by = deployedBy(options.deployedBy, process.env)
        return deployArtifact({
          artifact: options.artifact,
          target: options.target,
          url: options.url,
          env: process.env,
          client: { onRetry: retryNote(cli, json) },
          ...(by === undefined ? {} : { deployedBy: by }),
          ...(llm === undefined ? {} : { llm }),
        })
      })()
      cli.print(command, result.deployment, () => formatDeploy(result))
    })
}

/** `rollback`: re-activate the artifact the active deployment replaced. */
function registerRollback(program: Command, cli: CliContext): void {
  program
    .command('rollback')
    .description("re-activate the artifact a target's active deployment replaced (exit 2 when there is none)")
    .requiredOption('--target <name>', 'the target to roll back')
    .requiredOption('--url <url>', "the edge's base URL")
    .option('--deployed-by <name>', 'who rolls back, recorded with the rollback (default: $USER)')
    .addHelpText(
      'after',
      `${COMMON_HELP}\n\nExamples:\n  reward-harness rollback --target prod --url https://rm.example.com\n  ` +
        `reward-harness rollback --target prod --url https://rm.example.com --json`,
    )
    .action(async (options: EdgeFlags & { deployedBy?: string }, command: Command) => {
      const { deployedBy, rollbackTarget } = await import('../../deploy/run.ts')
      const { formatRecord } = await import('../../deploy/format.ts')
      const json = cli.json(command)
      const by = deployedBy(options.deployedBy, process.env)
      const result = await rollbackTarget({
        target: options.target,
        url: options.url,
        env: process.env,
        client: { onRetry: retryNote(cli, json) },
        ...(by === undefined ? {} : { deployedBy: by }),
      })
      cli.print(command, result, () =>
        formatRecord(
          result,
          `rolled target ${result.target} back to ${result.artifact_id} (from ` +
            `${result.previous_artifact_id ?? 'none'})`,
        ),
      )
    })
}

/** `deployments`: a target's deployments and rollbacks, newest first. */
function registerDeployments(program: Command, cli: CliContext): void {
  program
    .command('deployments')
    .description("list a target's deployments and rollbacks, newest first, and its active artifact")
    .requiredOption('--target <name>', 'the target')
    .requiredOption('--url <url>', "the edge's base URL")
    .addHelpText(
      'after',
      `${COMMON_HELP}\n\nExamples:\n  reward-harness deployments --target prod --url https://rm.example.com\n  ` +
        `reward-harness deployments --target prod --url https://rm.example.com --json`,
    )
    .action(async (options: EdgeFlags, command: Command) => {
      const { listDeployments } = await import('../../deploy/run.ts')
      const { formatDeployments } = await import('../../deploy/format.ts')
      const json = cli.json(command)
      const result = await listDeployments({
        target: options.target,
        url: options.url,
        env: process.env,
        client: { onRetry: retryNote(cli, json) },
      })
      cli.print(command, result, () => formatDeployments(result))
    })
}

/** A stderr note per retry (text mode only: under --json stderr carries only the JSON error). */
function retryNote(cli: CliContext, json: boolean) {
  return (info: { method: string; path: string; status: number; attempt: number; waitMs: number }) => {
    if (!json)
      cli.io.err(
        `note: ${info.method} ${info.path} answered ${info.status}; retrying in ${(info.waitMs / 1000).toFixed(1)} s ` +
          `(attempt ${info.attempt + 1})\n`,
      )
  }
}
