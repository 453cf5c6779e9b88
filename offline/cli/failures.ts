/**
 * The one place where an error becomes an exit code and a message: 0 for help and version, 2 for input the CLI
 * or the edge refuses (a UsageError, a DatasetError, a flag commander refuses, an edge 4xx), 3 for a refused
 * training handshake, a command's own code for CliExit, 1 for everything else (the edge unreachable, a 5xx, a bug).
 * Text mode prints `error: <message>` with any issues and details; `--json` prints `{"error": {…}}` on stderr.
 */
import { redactUrlsIn } from '../../src/credentials/index.ts'
import { CommanderError } from 'commander'
import { DatasetError } from '../../src/datasets/errors.ts'
import { USAGE_EXIT_CODE, UsageError } from '../../src/usage-error/index.ts'
import { EdgeHttpError, EdgeNetworkError, EdgeProtocolError } from '../deploy/errors.ts'
import { ADMIN_TOKEN_ENV, unreachableHint } from '../edge/index.ts'
import { EXIT_HANDSHAKE_REFUSED, HandshakeRefusedError } from '../train/errors.ts'

export const EXIT_OK = 0
export const EXIT_FAILURE = 1
const EXIT_BAD_INPUT = USAGE_EXIT_CODE

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

/** An error as the CLI reports it: its exit code, and what stderr shows in text and in JSON mode (if anything). */
interface CliFailure {
  exitCode: number
  /** The text-mode lines, without the final newline; undefined when nothing is printed. */
  text?: string
  /** The `error` object of `--json` mode; undefined when nothing is printed. */
  json?: { kind: string; code: string; message: string; status?: number; issues?: unknown; details?: unknown }
}

/**
 * How the CLI reports `error`.
 * @example describeFailure(new UsageError('--steps must be an integer')) // { exitCode: 2, text: 'error: --steps …', …
 *   }
 */
function describeFailure(error: unknown): CliFailure {
  if (error instanceof CommanderError) return commanderFailure(error)
  if (error instanceof CliExit)
    return error.message
      ? { exitCode: error.exitCode, text: error.message, json: { kind: 'exit', code: 'exit', message: error.message } }
      : { exitCode: error.exitCode }
  if (error instanceof DatasetError) return datasetFailure(error)
  if (error instanceof UsageError)
    return withText({
      exitCode: EXIT_BAD_INPUT,
      json: {
        kind: 'bad_input',
        code: error.code,
        message: error.message,
        ...(error.issues.length > 0 ? { issues: error.issues } : {}),
      },
    })
  if (error instanceof HandshakeRefusedError)
    return {
      exitCode: EXIT_HANDSHAKE_REFUSED,
      text: `error: handshake refused: ${error.message}`,
      json: { kind: 'refused', code: error.code, message: error.message },
    }
  const edge = edgeFailure(error)
  if (edge) return withText(edge)
  const message = error instanceof Error ? error.message : String(error)
  const stack = process.env.REWARD_HARNESS_DEBUG && error instanceof Error ? `\n${error.stack}` : ''
  return {
    exitCode: EXIT_FAILURE,
    text: `error: ${message}${stack}`,
    json: { kind: 'failure', code: error instanceof Error ? error.name : 'unknown', message },
  }
}

/** Help and version end with 0; every other commander exit is a usage error commander has already printed. */
function commanderFailure(error: CommanderError): CliFailure {
  if (error.exitCode === 0) return { exitCode: EXIT_OK }
  const message =
    error.code === 'commander.help' ? 'no command given; see --help' : error.message.replace(/^error: /, '')
  return { exitCode: EXIT_BAD_INPUT, json: { kind: 'bad_input', code: error.code, message } }
}

function datasetFailure(error: DatasetError): CliFailure {
  return {
    exitCode: EXIT_BAD_INPUT,
    text:
      error.issues.length > 1
        ? `error: ${error.issues.length} problems:\n${indent(error.message)}`
        : `error: ${error.message}`,
    json: { kind: 'bad_input', code: 'invalid_dataset', message: error.message, issues: error.issues },
  }
}

const ADMIN_HINT =
  `is the token (${ADMIN_TOKEN_ENV}, or ADMIN_TOKEN in .dev.vars for a server on this machine) ` +
  "this edge's ADMIN_TOKEN?"

/**
 * The CLI flags that do what an edge error asks for, for the errors a CLI user meets (the edge's own message names
 * its API fields).
 */
const CLI_EQUIVALENTS: Record<string, string> = {
  llm_not_configured:
    'with the CLI, name the judge at deploy: --llm-base-url <OpenAI-compatible /v1 URL> --llm-model <model> ' +
    "[--llm-api-key-env VAR]. An artifact's own base_url is recorded, not used: a URL that served the search " +
    'rarely answers from the edge',
  nothing_to_roll_back: 'reward-harness deployments --target <target> --url <edge> lists what the target has served',
  target_not_found: 'deploy an artifact there first: reward-harness deploy --artifact <file> --target <target>',
  artifact_not_found: 'reward-harness deploy --artifact <file> uploads the artifact before it activates it',
}

/** An edge error of the admin client: refused (4xx, exit 2) or failed (unreachable, 5xx, off-contract, exit 1). */
function edgeFailure(error: unknown): Omit<CliFailure, 'text'> | undefined {
  if (error instanceof EdgeHttpError) {
    const what =
      error.status === 401 || error.status === 403
        ? `the edge refused the admin token (${ADMIN_HINT})`
        : error.refused
          ? 'the edge refused the request'
          : 'the edge failed'
    return {
      exitCode: error.refused ? EXIT_BAD_INPUT : EXIT_FAILURE,
      json: {
        kind: error.refused ? 'bad_input' : 'failure',
        code: error.code,
        status: error.status,
        message:
          `${what}: ${error.method} ${error.path} → ${error.status} ` +
          `${error.code}${error.edgeMessage ? `: ${error.edgeMessage}` : ''}` +
          `${CLI_EQUIVALENTS[error.code] ? `\n  hint: ${CLI_EQUIVALENTS[error.code]}` : ''}`,
        ...(error.details === undefined ? {} : { details: error.details }),
      },
    }
  }
  if (error instanceof EdgeNetworkError)
    return {
      exitCode: EXIT_FAILURE,
      json: {
        kind: 'failure',
        code: 'network_error',
        message: `cannot reach the edge at ${error.baseUrl} (${error.message}). ${unreachableHint(error.baseUrl)}`,
      },
    }
  if (error instanceof EdgeProtocolError)
    return { exitCode: EXIT_FAILURE, json: { kind: 'failure', code: 'protocol_error', message: error.message } }
  return undefined
}

/** Adds the text form: `error: <message>`, then the issues, then the edge's details. */
function withText(failure: Omit<CliFailure, 'text'>): CliFailure {
  const json = failure.json!
  const lines = [`error: ${json.message}`]
  for (const issue of (json.issues as readonly string[] | undefined) ?? []) lines.push(`  - ${issue}`)
  if (json.details !== undefined) lines.push(...detailLines(json.details))
  return { ...failure, text: lines.join('\n') }
}

function detailLines(details: unknown): string[] {
  if (
    Array.isArray(details) &&
    details.every(
      (item) =>
        typeof item === 'string' ||
        (isRecord(item) && (typeof item.message === 'string' || typeof item.reason === 'string')),
    )
  ) {
    return [
      '  details:',
      ...details.map((item) => {
        if (typeof item === 'string') return `    - ${item}`
        const record = item as Record<string, unknown>
        const place = [record.path, record.field, record.place].find(
          (value) => (typeof value === 'string' && value) || Array.isArray(value),
        )
        const where = Array.isArray(place) ? place.join('.') : (place as string | undefined)
        return `    - ${where ? `${where}: ` : ''}${String(record.message ?? record.reason)}`
      }),
    ]
  }
  return [
    '  details:',
    ...JSON.stringify(details, null, 2)
      .split('\n')
      .map((line) => `    ${line}`),
  ]
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((line) => `  ${line}`)
    .join('\n')
}

/**
 * Prints how `error` ended the command on `err` and returns the exit code.
 * @example return reportFailure(error, io.err, jsonMode)
 */
export function reportFailure(error: unknown, err: (text: string) => void, jsonMode: boolean): number {
  const failure = describeFailure(error)
  // A message may quote a URL as it was typed (--base-url, --url): its credentials are never printed.
  if (jsonMode && failure.json) err(`${redactUrlsIn(JSON.stringify({ error: failure.json }))}\n`)
  if (!jsonMode && failure.text !== undefined) err(`${redactUrlsIn(failure.text)}\n`)
  return failure.exitCode
}
