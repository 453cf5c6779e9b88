/**
 * How the artifact and deploy commands end on an error: exit 2 for input the command or the edge refuses (a bad
 * flag, a missing token, an invalid or tampered artifact, an edge 4xx such as 400 invalid_artifact or 409
 * nothing_to_roll_back), exit 1 for failures (the edge unreachable, a 5xx, 429/503 after every retry, an answer
 * that breaks the contract). The message goes to stderr with every issue or detail; under `--json` as
 * `{"error": {kind, code, message, status?, issues?, details?}}`.
 */
import { ArtifactInputError } from '../artifacts/errors.ts'
import { CliExit, EXIT_BAD_INPUT, EXIT_FAILURE, type CliIo } from '../cli/program.ts'
import { EdgeHttpError, EdgeNetworkError, EdgeProtocolError } from './client.ts'
import { DeployInputError } from './run.ts'

/** An error as the CLI reports it. */
export interface CliFailure {
  exitCode: number
  kind: 'bad_input' | 'failure'
  code: string
  message: string
  status?: number
  issues?: readonly string[]
  details?: unknown
}

/**
 * The CLI form of a known error, or undefined for errors the generic handler reports.
 * @example describeFailure(new DeployInputError('--target: bad')) // { exitCode: 2, kind: 'bad_input', code: 'usage', … }
 */
export function describeFailure(error: unknown): CliFailure | undefined {
  if (error instanceof ArtifactInputError)
    return {
      exitCode: EXIT_BAD_INPUT,
      kind: 'bad_input',
      code: error.code,
      message: error.message,
      issues: error.issues,
    }
  if (error instanceof DeployInputError)
    return { exitCode: EXIT_BAD_INPUT, kind: 'bad_input', code: 'usage', message: error.message }
  if (error instanceof EdgeHttpError) {
    const what =
      error.status === 401 || error.status === 403
        ? `the edge refused the admin token (${ADMIN_HINT})`
        : error.refused
          ? 'the edge refused the request'
          : 'the edge failed'
    return {
      exitCode: error.refused ? EXIT_BAD_INPUT : EXIT_FAILURE,
      kind: error.refused ? 'bad_input' : 'failure',
      code: error.code,
      status: error.status,
      message: `${what}: ${error.method} ${error.path} → ${error.status} ${error.code}${error.edgeMessage ? `: ${error.edgeMessage}` : ''}`,
      ...(error.details === undefined ? {} : { details: error.details }),
    }
  }
  if (error instanceof EdgeNetworkError)
    return {
      exitCode: EXIT_FAILURE,
      kind: 'failure',
      code: 'network_error',
      message: `cannot reach the edge: ${error.message}`,
    }
  if (error instanceof EdgeProtocolError)
    return { exitCode: EXIT_FAILURE, kind: 'failure', code: 'protocol_error', message: error.message }
  return undefined
}

const ADMIN_HINT = 'is REWARD_HARNESS_ADMIN_TOKEN the ADMIN_TOKEN of this edge?'

/**
 * Reports a known error on stderr and throws CliExit with its exit code; rethrows anything else.
 * @example try { … } catch (error) { failWith(error, cli.io, cli.json(command)) }
 */
export function failWith(error: unknown, io: CliIo, json: boolean): never {
  const failure = describeFailure(error)
  if (!failure) throw error
  if (json) {
    const { exitCode: _exit, ...body } = failure
    io.err(`${JSON.stringify({ error: body })}\n`)
  } else {
    io.err(`${formatFailure(failure)}\n`)
  }
  throw new CliExit(failure.exitCode)
}

/**
 * The text form: `error: <message>`, then the issues, then the edge's details.
 * @example formatFailure({ exitCode: 2, kind: 'bad_input', code: 'x', message: 'bad', issues: ['a: b'] }) // 'error: bad\n  - a: b'
 */
export function formatFailure(failure: CliFailure): string {
  const lines = [`error: ${failure.message}`]
  for (const issue of failure.issues ?? []) lines.push(`  - ${issue}`)
  if (failure.details !== undefined) lines.push(...detailLines(failure.details))
  return lines.join('\n')
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
