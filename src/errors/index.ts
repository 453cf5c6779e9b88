/** Stable, machine-readable error codes and the HTTP status each maps to. */
const ERROR_STATUS = {
  invalid_request: 400,
  invalid_json: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  run_not_found: 404,
  run_exists: 409,
  payload_too_large: 413,
  /** The caller used up its rate limit for the current window; `Retry-After` says when to come back. */
  rate_limited: 429,
  /**
   * A rollout of one more instance than the run's `budgets.instances_per_step` in the collecting step; `details.budget`
   * names the key.
   */
  instance_budget_exceeded: 429,
  /**
   * A `/complete` past the run's `budgets.updates_per_window` step updates in `budgets.update_window_s`; `Retry-After`
   * says when one more fits.
   */
  update_budget_exceeded: 429,
  /** A rollout's judgement spent the run's `budgets.judge_calls_per_rollout` LLM calls without a valid reply. */
  judge_budget_exceeded: 429,
  /**
   * A memory search past the run's `budgets.memory_searches_per_hour` (each embeds its query); `Retry-After` says when
   * one more fits.
   */
  memory_search_budget_exceeded: 429,
  unsupported_media_type: 415,
  llm_unavailable: 503,
  /** The rollout's judging prompt does not fit the judge model's context window; `details.context_limit` names it. */
  context_length_exceeded: 413,
  /** A Durable Object or D1 had more requests than it could queue; `Retry-After` says when to come back. */
  overloaded: 503,
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
  /** `/rm/<target>/…` on a target nothing was ever deployed to. */
  target_not_found: 404,
  /** The artifact has neither a rubric for the prompt id nor a `__default__` one. */
  prompt_not_found: 404,
  /**
   * The run keeps no archive of its scored rollouts (its config lacks `archive: true`, or the Worker has no bucket).
   */
  archive_disabled: 409,
  /**
   * A judge or embedder endpoint this server may not send its keys to in production: an internal address not on the
   * operator's `LLM_HOST_ALLOWLIST`, or any host off that list when it is set.
   */
  llm_host_not_allowed: 400,
  /** Production's default run has no judge configured (it would grade with the mock heuristic). */
  no_judge_configured: 503,
  internal: 500,
} as const
export type ErrorCode = keyof typeof ERROR_STATUS

export interface AppErrorOptions {
  details?: unknown
  retryAfterSeconds?: number
  /** Overrides the code's usual status, e.g. 502 for a model that answered but never validly. */
  status?: number
}

/**
 * An error a caller can act on: a stable `code`, a message a person understands, optional details.
 * @example throw new AppError('run_not_found', 'no run named "grpo-1"')
 */
export class AppError extends Error {
  readonly status: number
  readonly details: unknown
  readonly retryAfterSeconds: number | undefined
  constructor(
    readonly code: ErrorCode,
    message: string,
    options: AppErrorOptions = {},
  ) {
    super(message)
    this.name = 'AppError'
    this.status = options.status ?? ERROR_STATUS[code]
    this.details = options.details
    this.retryAfterSeconds = options.retryAfterSeconds
  }
}

/**
 * A prompt over a model's context window as the caller sees it: a 413 naming the limit, never retried, since only a
 * shorter rollout (or a judge with a longer window) can be judged.
 * @example throw contextLengthExceeded('scoring', error.message, 8192)
 */
export function contextLengthExceeded(model: string, reason: string, limit: number | undefined): AppError {
  return new AppError(
    'context_length_exceeded',
    `the rollout does not fit the ${model} model's context window${limit ? ` of ${limit} tokens` : ''}: ${reason}`,
    { details: { failure: 'context_length', ...(limit ? { context_limit: limit } : {}) } },
  )
}
