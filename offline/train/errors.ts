/**
 * How `train` commands end on an error: exit 2 for refused input (a flag, a file, an unknown target, an edge 4xx),
 * exit 3 when the handshake refuses the target (not healthy, or serving another artifact than `--expect-artifact`),
 * exit 1 for failures (the edge unreachable, a 5xx); the edge's errors are reported as `deploy` reports them.
 */
import { failWith } from '../deploy/cli-errors.ts'
import { CliExit, CliUsageError, type CliIo } from '../cli/program.ts'

/** The exit code of a refused handshake: distinct from 2 so a launcher can tell "wrong RM" from "bad flags". */
export const EXIT_HANDSHAKE_REFUSED = 3

/**
 * Input a train command cannot act on (exit 2).
 * @example throw new TrainInputError('--dataset "gsm8k": use <id>@<version>, e.g. gsm8k@v3')
 */
export class TrainInputError extends Error {
  override name = 'TrainInputError'
}

/**
 * The target is not the one the training run was meant for (exit 3); nothing has been written or recorded.
 * @example throw new HandshakeRefusedError('target prod serves rm_a…, not the expected rm_b…')
 */
export class HandshakeRefusedError extends Error {
  override name = 'HandshakeRefusedError'
  readonly code = 'handshake_refused'
}

/**
 * Reports a train, deploy or edge error on stderr and throws CliExit (or CliUsageError) with its exit code; anything
 * else is rethrown for the generic handler.
 * @example await prepareTraining(options).catch((error: unknown) => failTrain(error, cli.io, cli.json(command)))
 */
export function failTrain(error: unknown, io: CliIo, json: boolean): never {
  if (error instanceof TrainInputError) throw new CliUsageError(error.message)
  if (error instanceof HandshakeRefusedError) {
    io.err(
      json
        ? `${JSON.stringify({ error: { kind: 'refused', code: error.code, message: error.message } })}\n`
        : `error: handshake refused: ${error.message}\n`,
    )
    throw new CliExit(EXIT_HANDSHAKE_REFUSED)
  }
  return failWith(error, io, json)
}
