/**
 * The error a `train` command ends on when the handshake refuses the target: exit 3 (offline/cli/failures.ts), distinct
 * from 2 so a launcher can tell "wrong RM" from "bad flags". Refused input is a UsageError (exit 2).
 */

/** The exit code of a refused handshake. */
export const EXIT_HANDSHAKE_REFUSED = 3

/**
 * The target is not the one the training run was meant for (exit 3); nothing has been written or recorded.
 * @example throw new HandshakeRefusedError('target prod serves rm_a…, not the expected rm_b…')
 */
export class HandshakeRefusedError extends Error {
  override name = 'HandshakeRefusedError'
  readonly code = 'handshake_refused'
}
