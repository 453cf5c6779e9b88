/** Input the report command cannot use (missing, unrecognised or malformed): the CLI exits 2 with its message. */
export class ReportInputError extends Error {
  override name = 'ReportInputError'
}
