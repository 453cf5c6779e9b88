/**
 * The error codes of the artifact, deployment and RM-server routes, rendered in the house shape
 * `{error: {code, message, details?}, request_id}`. They live here rather than in `src/errors` because these
 * routes are the only ones that raise them; anything else falls through to the app's `renderError`.
 */
import type { Context } from 'hono'
import type { AppEnv } from '../env.ts'
import { renderError } from '../middleware/errors.ts'

/** Every code these routes raise, with its HTTP status. */
export const RM_ERROR_STATUS = {
  /** The uploaded artifact fails the schema, its content address, or a serving check. */
  invalid_artifact: 400,
  /** A deployment names an artifact this Worker has never stored. */
  artifact_not_found: 404,
  /** A rollback on a target whose active deployment has no previous artifact. */
  nothing_to_roll_back: 409,
  /** Another deployment of the same target kept landing first; nothing changed, try again. */
  deployment_conflict: 409,
  /** An openai-backend artifact without a usable endpoint (deployment `llm` or `RM_LLM_BASE_URL`). */
  llm_not_configured: 400,
  /** `/rm/<target>/…` on a target with no active artifact. */
  no_active_artifact: 503,
  /** The artifact has neither a rubric for the prompt id nor a `__default__` one. */
  prompt_not_found: 404,
} as const
export type RmErrorCode = keyof typeof RM_ERROR_STATUS

/**
 * An error of the artifact and RM routes: a stable code, a message a person can act on, optional details.
 * @example throw new RmError('artifact_not_found', `no artifact "${id}" is stored; upload it with POST /admin/artifacts first`)
 */
export class RmError extends Error {
  readonly status: number
  constructor(
    readonly code: RmErrorCode,
    message: string,
    readonly details?: unknown,
  ) {
    super(message)
    this.name = 'RmError'
    this.status = RM_ERROR_STATUS[code]
  }
}

/**
 * `onError` of the artifact and RM sub-apps: renders an `RmError`, hands anything else to `renderError`.
 * @example new Hono<AppEnv>().onError(renderRmError)
 */
export function renderRmError(error: Error, c: Context<AppEnv>): Response {
  if (!(error instanceof RmError)) return renderError(error, c)
  const body = { error: { code: error.code, message: error.message, ...(error.details === undefined ? {} : { details: error.details }) }, request_id: c.get('requestId') ?? 'unknown' }
  return c.json(body, error.status as 400)
}
