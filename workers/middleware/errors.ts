import type { Context } from 'hono'
import { HTTPException } from 'hono/http-exception'
import { redactUrlsIn } from '../../src/credentials/index.ts'
import { AppError } from '../../src/errors/index.ts'
import { LlmError } from '../../src/llm/index.ts'
import type { AppEnv } from '../env.ts'
import { isObjectReset, isOverloaded, overloaded } from '../objects/call.ts'

/**
 * The one place errors become HTTP: `{error: {code, message, details?}, request_id}` with the code's status.
 * An upstream model or embeddings server's failure that no route translated (an embedder's 400 on `GET /memory?q=`)
 * is `llm_unavailable`: 503 with Retry-After when it may heal, else 502, never a 500.
 * Unknown errors are a 500 `internal` whose message reveals nothing; they are logged with the request id.
 * @example app.onError(renderError)
 */
export function renderError<E extends AppEnv>(error: Error, c: Context<E>): Response {
  const requestId = c.get('requestId') ?? 'unknown'
  const appError = toAppError(error)
  if (appError.status >= 500 && appError.code === 'internal') console.error(`[${requestId}]`, error)
  if (appError.retryAfterSeconds !== undefined) c.header('retry-after', String(Math.ceil(appError.retryAfterSeconds)))
  const body = {
    error: {
      code: appError.code,
      message: appError.message,
      ...(appError.details === undefined ? {} : { details: appError.details }),
    },
    request_id: requestId,
  }
  const response = c.json(body, appError.status as 400)
  return new Response(response.body, {
    status: response.status,
    statusText: reasonPhrase(response.status, appError),
    headers: response.headers,
  })
}

/** The standard reason phrases of the statuses this Worker answers with. */
const REASONS: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  409: 'Conflict',
  413: 'Payload Too Large',
  415: 'Unsupported Media Type',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
}

/**
 * The HTTP reason phrase with the error's code and the start of its message: trainers log an HTTP error by its status
 * line (OpenRLHF's `413 Client Error: <reason> for url`, slime's aiohttp `message='<reason>'`), not its body. Visible
 * ASCII only, as a status line allows.
 * @example reasonPhrase(413, error) // 'Payload Too Large (payload_too_large: a trajectory holds at most 256…)'
 */
function reasonPhrase(status: number, error: AppError): string {
  const detail = `${error.code}: ${error.message}`.replace(/[^\x20-\x7e]+/g, ' ').slice(0, 160)
  return `${REASONS[status] ?? 'Error'} (${detail})`
}

/**
 * The AppError an error is answered as (see renderError).
 * @example toAppError(new LlmError('bad_request', 'HTTP 400')).code // 'llm_unavailable'
 */
export function toAppError(error: Error): AppError {
  if (error instanceof AppError) return error
  if (error instanceof HTTPException) {
    if (error.status === 413)
      return new AppError('payload_too_large', 'the request body is larger than this route takes')
    return new AppError(error.status === 404 ? 'not_found' : 'invalid_request', error.message || 'bad request', {
      status: error.status,
    })
  }
  if (error instanceof LlmError) {
    const transient = error.transient
    return new AppError(
      'llm_unavailable',
      `an upstream model server failed (${error.kind}): ${redactUrlsIn(error.message)}`,
      {
        status: transient ? 503 : 502,
        details: { failure: error.kind },
        ...(transient ? { retryAfterSeconds: error.retryAfterSeconds ?? 5 } : {}),
      },
    )
  }
  if (isOverloaded(error) || isObjectReset(error)) return overloaded()
  return new AppError('internal', 'internal error; the request id identifies it in the logs')
}
