import type { MiddlewareHandler } from 'hono'
import { AppError } from '../../src/errors/index.ts'
import { sha256Hex } from '../../src/hash/index.ts'
import type { AppEnv, Principal } from '../env.ts'
import { DEFAULT_RUN_ID, loadRunConfig, runForToken } from '../runs/store.ts'

/** Run tokens are never revoked in place, so an isolate may remember which run a token hash belongs to. */
const tokenRuns = new Map<string, string>()

/**
 * Identifies the caller from `Authorization: Bearer <token>`: the admin token, a run token, or nobody.
 * A token that is neither is a 401, never a silent fall back to anonymous.
 * @example app.use('*', identifyCaller())
 */
export function identifyCaller(): MiddlewareHandler<AppEnv> {
  return async function identify(c, next) {
    c.set('principal', await principalFor(c.env, c.req.header('authorization')))
    await next()
  }
}

async function principalFor(env: AppEnv['Bindings'], header: string | undefined): Promise<Principal> {
  if (!header) return { kind: 'anonymous' }
  const token = header.match(/^Bearer\s+(\S+)\s*$/i)?.[1]
  if (!token) throw new AppError('unauthorized', 'the Authorization header must be "Bearer <token>"')
  const tokenHash = await sha256Hex(token)
  if (env.ADMIN_TOKEN && tokenHash === (await sha256Hex(env.ADMIN_TOKEN))) return { kind: 'admin' }
  const runId = tokenRuns.get(tokenHash) ?? (await runForToken(env.DB, token))
  if (!runId) throw new AppError('unauthorized', 'the bearer token is not valid for any run')
  tokenRuns.set(tokenHash, runId)
  return { kind: 'run', runId }
}

/**
 * Resolves the run a request addresses — the `/runs/:runId` prefix, else the run of the caller's token,
 * else the default run — and checks the caller may use it.
 * @example api.use('*', resolveRun())
 */
export function resolveRun(): MiddlewareHandler<AppEnv> {
  return async function resolve(c, next) {
    const principal = c.get('principal')
    const pathRunId = c.req.param('runId')
    const runId = pathRunId ?? (principal.kind === 'run' ? principal.runId : DEFAULT_RUN_ID)
    if (principal.kind === 'run' && principal.runId !== runId) {
      throw new AppError('forbidden', `this token belongs to run "${principal.runId}", not "${runId}"`)
    }
    const config = await loadRunConfig(c.env.DB, runId)
    if (!config) throw new AppError('run_not_found', `there is no run named "${runId}"`)
    const openToAnyone = config.access === 'open' || (runId === DEFAULT_RUN_ID && c.env.DEPLOYMENT === 'local')
    if (principal.kind === 'anonymous' && !openToAnyone) {
      throw new AppError('unauthorized', `run "${runId}" needs a bearer token (its run token or the admin token)`)
    }
    c.set('run', { id: runId, config })
    await next()
  }
}

/**
 * Lets only the admin token through.
 * @example app.post('/runs', requireAdmin(), createRunHandler)
 */
export function requireAdmin(): MiddlewareHandler<AppEnv> {
  return async function admin(c, next) {
    const principal = c.get('principal')
    if (principal.kind === 'admin') return next()
    if (!c.env.ADMIN_TOKEN) throw new AppError('forbidden', 'admin routes are disabled: set the ADMIN_TOKEN secret')
    throw new AppError(principal.kind === 'anonymous' ? 'unauthorized' : 'forbidden', 'this route needs the admin token')
  }
}
