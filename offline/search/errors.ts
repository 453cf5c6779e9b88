/**
 * The two ways a search run ends early on purpose: bad input (exit code 2) and an interruption (Ctrl-C,
 * SIGTERM, or the hidden test flag `--abort-after-calls`; exit code 130, the last checkpoint kept).
 */
import { UsageError } from '../../src/usage-error/index.ts'

/**
 * A flag, file or setting the search cannot use; the message names the flag or the file and the place.
 * The CLI turns it into exit code 2.
 * @example throw new SearchInputError('--generations: expected an integer, got "ten"')
 */
export class SearchInputError extends UsageError {
  override name = 'SearchInputError'
}

/** What interrupted a run. */
export type InterruptCause = 'SIGINT' | 'SIGTERM' | 'abort-after-calls'

/**
 * The abort reason of an interrupted run: the search stops at once, and the last checkpoint stays valid.
 * @example controller.abort(new SearchInterrupted('SIGINT'))
 */
export class SearchInterrupted extends Error {
  override name = 'SearchInterrupted'
  /** @example new SearchInterrupted('SIGTERM').message // 'interrupted by SIGTERM' */
  constructor(readonly by: InterruptCause) {
    super(by === 'abort-after-calls' ? 'interrupted (--abort-after-calls)' : `interrupted by ${by}`)
  }
}
