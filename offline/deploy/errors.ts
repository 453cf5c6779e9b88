/**
 * What can go wrong talking to the edge's admin API, as error classes: a refusal (non-2xx), no answer, an answer
 * that breaks the contract. Kept apart from the client so the CLI's failure reporting loads without it.
 */

/**
 * The edge answered with a non-2xx status (after retries for 429/503); `code`, `message` and `details` come from its
 * `{error: {code, message, details}}` body when it has one.
 * @example if (error instanceof EdgeHttpError && error.status === 409) console.log(error.code) //
 *   'nothing_to_roll_back'
 */
export class EdgeHttpError extends Error {
  override name = 'EdgeHttpError'
  /** @example new EdgeHttpError('POST', '/admin/artifacts', 400, 'invalid_artifact', 'bad', []).status // 400 */
  constructor(
    readonly method: string,
    readonly path: string,
    readonly status: number,
    readonly code: string,
    readonly edgeMessage: string,
    readonly details: unknown,
  ) {
    super(`${method} ${path}: ${status} ${code}${edgeMessage ? `: ${edgeMessage}` : ''}`)
  }

  /** 4xx other than 429: the request itself was refused (bad input, exit 2). */
  get refused(): boolean {
    return this.status >= 400 && this.status < 500 && this.status !== 429
  }
}

/**
 * The edge could not be reached, or did not answer in time.
 * @example throw new EdgeNetworkError('GET', '/admin/targets/prod/deployments', 'connect ECONNREFUSED 127.0.0.1:8787')
 */
export class EdgeNetworkError extends Error {
  override name = 'EdgeNetworkError'
  /** @example new EdgeNetworkError('GET', '/x', 'timeout', 'http://127.0.0.1:8787').message // 'GET /x: timeout' */
  constructor(
    readonly method: string,
    readonly path: string,
    reason: string,
    /** The edge's base URL, which the CLI's message names with what to do. */
    readonly baseUrl: string,
  ) {
    super(`${method} ${path}: ${reason}`)
  }
}

/**
 * A 2xx answer whose body is not what the API contract says (a different edge version, or a proxy's page).
 * @example throw new EdgeProtocolError('POST', '/admin/artifacts', 'artifact_id: expected string')
 */
export class EdgeProtocolError extends Error {
  override name = 'EdgeProtocolError'
  /** @example new EdgeProtocolError('GET', '/x', 'not JSON').message // 'GET /x: unexpected answer: not JSON' */
  constructor(
    readonly method: string,
    readonly path: string,
    reason: string,
  ) {
    super(`${method} ${path}: unexpected answer: ${reason}`)
  }
}
