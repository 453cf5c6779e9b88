import type { Context, MiddlewareHandler } from 'hono'
import { AppError } from '../../src/errors/index.ts'
import type { RunConfig } from '../../src/schemas/run-config.ts'
import type { AppEnv, Env } from '../env.ts'
import { DEFAULT_RUN_ID, loadRunConfig } from '../../durable-objects/run-config.ts'

/** The window of the rate-limit bindings when `RATE_LIMIT_PERIOD_S` does not say (the bindings offer 10 or 60 s). */
const DEFAULT_RATE_LIMIT_PERIOD_S = 10

/**
 * Limits requests per caller with the Workers rate-limiting bindings (no Durable Object round trip on the hot path),
 * declared on the routes it guards (a health probe declares none, so it is never limited):
 * - the admin token counts against `ADMIN_RATE_LIMITER`, apart from everyone else;
 * - a run token (or the RM token) against its run's tier, keyed by the SHA-256 of the token;
 * - a caller without a token against the tier of the run it addresses (the run `resolveRun` resolved, else the route's
 *   `:runId`, else the default run), keyed by its IP (`CF-Connecting-IP`).
 * A run's `rate_limit` picks the tier: `standard` (`RATE_LIMITER`), `high` (`RATE_LIMITER_HIGH`) or `off`. An
 * unbound tier is not limited. Over the limit: 429 `rate_limited` with `Retry-After` (seconds to the window's end).
 * Runs after `identifyCaller`, which sets the principal, and on the run API after `resolveRun`, whose run it uses.
 * @example runApi.use('*', resolveRun(), rateLimit()); admin.post('/runs', rateLimit(), requireAdmin(), handler)
 */
export function rateLimit(): MiddlewareHandler<AppEnv> {
  return async function limitRate(c, next) {
    const principal = c.get('principal')
    let limiter: RateLimit | undefined
    let key: string
    if (principal.kind === 'admin') {
      limiter = c.env.ADMIN_RATE_LIMITER
      key = 'admin'
    } else {
      limiter = limiterFor(c.env, await callerRunConfig(c))
      if (!limiter) return next()
      // A hash (taken by identifyCaller), so no token is ever handed to the limiter; anonymous callers share their IP's
      // budget.
      const tokenHash = principal.kind === 'run' ? principal.tokenHash : principal.rmTokenHash
      key = tokenHash ? `token:${tokenHash}` : `ip:${c.req.header('cf-connecting-ip') ?? 'unknown'}`
    }
    if (limiter && !(await limiter.limit({ key })).success)
      throw rateLimited(c.env, 'too many requests from this caller')
    return next()
  }
}

/**
 * The config of the run whose tier a caller other than the admin counts against: the run `resolveRun` resolved (the
 * run API), else the run of the caller's token, else the run the route names (`:runId`), else the default run;
 * undefined for a run that does not exist (the standard tier).
 */
async function callerRunConfig(c: Context<AppEnv>): Promise<RunConfig | undefined> {
  const resolved = c.get('run') as AppEnv['Variables']['run'] | undefined
  if (resolved) return resolved.config
  const principal = c.get('principal')
  const runId = principal.kind === 'run' ? principal.runId : (c.req.param('runId') ?? DEFAULT_RUN_ID)
  return loadRunConfig(c.env.DB, runId).catch(() => undefined)
}

/** The binding of a run's tier; undefined for `off` or an unbound tier. An unknown run gets the standard tier. */
function limiterFor(env: Env, config: RunConfig | undefined): RateLimit | undefined {
  const tier = config?.rate_limit ?? 'standard'
  if (tier === 'off') return undefined
  return tier === 'high' ? env.RATE_LIMITER_HIGH : env.RATE_LIMITER
}

/**
 * Counts a refused credential against its IP in `REFUSED_CREDENTIAL_LIMITER`, a budget of its own and tighter than any
 * tier, so guessing tokens is throttled without spending the address's budget for real traffic (the rate limiter proper
 * runs after `identifyCaller`, which refuses unknown tokens first). Throws `rate_limited` once the IP's budget is
 * spent.
 * Unbound (an older wrangler.toml), it falls back to the standard limiter under its own key.
 * @example if (!runId) { await countRefusedCredential(c.env, c.req.header('cf-connecting-ip')); throw unauthorized }
 */
export async function countRefusedCredential(env: Env, ip: string | undefined): Promise<void> {
  const limiter = (env.REFUSED_CREDENTIAL_LIMITER as RateLimit | undefined) ?? env.RATE_LIMITER
  if (!limiter || (await limiter.limit({ key: `refused:${ip ?? 'unknown'}` })).success) return
  throw rateLimited(env, 'too many refused credentials from this address')
}

/** The 429 for a spent budget, with the seconds to the window's end as Retry-After. */
function rateLimited(env: Env, what: string): AppError {
  const retryAfterSeconds = secondsToWindowEnd(periodOf(env))
  return new AppError('rate_limited', `${what}: wait ${retryAfterSeconds} s (Retry-After) and try again`, {
    retryAfterSeconds,
  })
}

function periodOf(env: Env): number {
  const period = Number(env.RATE_LIMIT_PERIOD_S ?? DEFAULT_RATE_LIMIT_PERIOD_S)
  return Number.isInteger(period) && period > 0 ? period : DEFAULT_RATE_LIMIT_PERIOD_S
}

/**
 * Whole seconds until the current fixed window of `periodS` seconds ends (at least 1): when the caller's budget is
 * back.
 * @example secondsToWindowEnd(10, 1_700_000_003_500) // 7
 * @internal
 */
export function secondsToWindowEnd(periodS: number, now = Date.now()): number {
  return Math.max(1, Math.ceil((periodS * 1_000 - (now % (periodS * 1_000))) / 1_000))
}
