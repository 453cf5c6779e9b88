/**
 * Input a command cannot use (a bad flag, a missing or malformed file): the CLI prints the message and exits 2.
 * Everything that refuses input offline throws this one type, so offline/cli maps errors to exit codes in one place.
 * @example throw new UsageError('--out: the report is HTML; give a .html file, not "report.txt"')
 */
export class UsageError extends Error {
  override name = 'UsageError'
  /** The machine-readable code `--json` errors carry. */
  readonly code: string
  /** Every problem found, when there are several (printed one a line). */
  readonly issues: readonly string[]

  constructor(message: string, options: { code?: string; issues?: readonly string[]; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    this.code = options.code ?? 'usage'
    this.issues = options.issues ?? []
  }
}

/** The exit code of a UsageError. */
export const USAGE_EXIT_CODE = 2
