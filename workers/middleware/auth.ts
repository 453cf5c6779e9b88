import { LRUCache } from 'lru-cache'
import type { MiddlewareHandler } from 'hono'
import { AppError } from '../../src/errors/index.ts'
import { toHex } from '../../src/hash/index.ts'
import { backendOf } from '../../src/llm/index.ts'
import { agentSettingsFor } from '../../src/schemas/run-config.ts'
import type { AppEnv, Principal } from '../env.ts'
import { runForTokenHash } from '../runs/store.ts'
import { DEFAULT_RUN_ID, loadRunConfig } from '../../durable-objects/run-config.ts'
import { pathToken, runInPath } from './path-token.ts'
import { countRefusedCredential } from './rate-limit.ts'

const MAX_KNOWN_TOKENS = 1_000
/**
 * Tokens this isolate has already identified. A run token is trusted for {@link RUN_TOKEN_RECHECK_MS} after its check
 * (a revocation reaches every isolate within that window) and the Worker's secrets do not change while an isolate
 * lives, so a known token skips its SHA-256 (a tenth of a /score's CPU) and the D1 lookup.
 * Only valid tokens enter (a stranger cannot fill it); an entry counts only under the secrets it was checked with.
 * A token string is the key: the lookup hashes it, and strings are compared only on a hash match.
 */
const knownTokens = new LRUCache<
  string,
  { principal: Principal; adminToken?: string; rmToken?: string; checkedAt: number }
>({ max: MAX_KNOWN_TOKENS })
/**
 * How long an isolate trusts a run token it checked before asking D1 again: a token revoked in another isolate is
 * refused everywhere within this time (in the isolate that revoked it, at once).
 * @internal
 */
export const RUN_TOKEN_RECHECK_MS = 10_000

/**
 * Drops a run token from this isolate's cache (after its revocation), by the token's SHA-256 in hex.
 * @example forgetRunToken(revoked.token_hash)
 */
export function forgetRunToken(tokenHash: string): void {
  const revoked = [...knownTokens.entries()].filter(
    ([, known]) => known.principal.kind === 'run' && known.principal.tokenHash === tokenHash,
  )
  for (const [token] of revoked) knownTokens.delete(token)
}

/**
 * Identifies the caller from `Authorization: Bearer <token>` or a `/t/<token>/` path prefix (for clients that send no
 * headers; the token is used as if it came in the header, and the app routes on the path without it; both at once is
 * a 400): the admin token, a run token, or nobody (the
 * `RM_TOKEN` secret counts as nobody here: it opens `/rm/*` only). A token that is none of them is a 401, never a
 * silent fall back to anonymous. A token new to the isolate is compared with the secrets by SHA-256 digest in constant
 * time and looked up in D1 by its SHA-256 (all D1 stores); one it already identified is found in `knownTokens`.
 * @example app.use('*', identifyCaller())
 */
export function identifyCaller(): MiddlewareHandler<AppEnv> {
  return async function identify(c, next) {
    let principal: Principal
    const header = c.req.header('authorization')
    const inPath = pathToken(c.req.raw)
    if (inPath !== undefined && header !== undefined)
      throw new AppError(
        'invalid_request',
        'send the token once: in the Authorization header or in the /t/<token>/ path prefix, not both',
      )
    try {
      principal = await principalFor(c.env, inPath === undefined ? header : `Bearer ${inPath}`)
    } catch (error) {
      if (error instanceof AppError && error.code === 'unauthorized')
        await countRefusedCredential(c.env, c.req.header('cf-connecting-ip'))
      throw error
    }
    c.set('principal', principal)
    await next()
  }
}

/**
 * The token of an `Authorization: Bearer <token>` header value, or undefined for any other value.
 * @example bearerToken('Bearer rh_abc') // 'rh_abc'
 */
function bearerToken(header: string | undefined): string | undefined {
  return header?.match(/^Bearer\s+(\S+)\s*$/i)?.[1]
}

/**
 * The token of an `Authorization: Basic …` header value: its password, else its user name. Python's requests and
 * aiohttp send one for a URL with credentials (`https://x:<token>@host/…`), which keeps the token out of the path.
 * @example basicToken(`Basic ${btoa(':rh_abc')}`) // 'rh_abc'
 */
function basicToken(header: string | undefined): string | undefined {
  const encoded = header?.match(/^Basic\s+([A-Za-z0-9+/=]+)\s*$/i)?.[1]
  if (!encoded) return undefined
  let decoded: string
  try {
    decoded = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(
      Uint8Array.from(atob(encoded), (char) => char.charCodeAt(0)),
    )
  } catch {
    return undefined
  }
  const colon = decoded.indexOf(':')
  const [user, password] = colon < 0 ? [decoded, ''] : [decoded.slice(0, colon), decoded.slice(colon + 1)]
  return password || user || undefined
}

/**
 * Who an `Authorization` header value speaks for (see `identifyCaller`); a token that is no known secret throws 401.
 * The dashboard's login form calls it too, so both surfaces accept exactly the same tokens.
 * @example const principal = await principalFor(c.env, `Bearer ${token}`)
 */
export async function principalFor(env: AppEnv['Bindings'], header: string | undefined): Promise<Principal> {
  if (!header) return { kind: 'anonymous' }
  const token = bearerToken(header) ?? basicToken(header)
  if (!token) {
    // `-H "authorization: Bearer $ADMIN_TOKEN"` with the variable unset sends "Bearer " and nothing after it.
    if (/^(Bearer|Basic)\s*$/i.test(header.trim()))
      throw new AppError(
        'unauthorized',
        `the Authorization header says ${header.trim()} but carries no token (an unset shell variable?)`,
      )
    throw new AppError(
      'unauthorized',
      'the Authorization header must be "Bearer <token>" (or Basic with the token as user or password)',
    )
  }
  const known = knownTokens.get(token)
  const fresh = known && (known.principal.kind !== 'run' || Date.now() - known.checkedAt < RUN_TOKEN_RECHECK_MS)
  if (known && fresh && known.adminToken === env.ADMIN_TOKEN && known.rmToken === env.RM_TOKEN) return known.principal
  if (known) knownTokens.delete(token)
  const principal = await identifyToken(env, token)
  knownTokens.set(token, { principal, adminToken: env.ADMIN_TOKEN, rmToken: env.RM_TOKEN, checkedAt: Date.now() })
  return principal
}

async function identifyToken(env: AppEnv['Bindings'], token: string): Promise<Principal> {
  // One digest of the presented token serves every comparison, the run-token lookup and the rate limiter's key.
  const presented = await digest(token)
  if (env.ADMIN_TOKEN && digestsEqual(presented, await secretDigest(env.ADMIN_TOKEN))) return { kind: 'admin' }
  const tokenHash = toHex(presented)
  // The RM token names no run: anonymous everywhere but `/rm/<target>/…` (requireRmAccess).
  if (env.RM_TOKEN && digestsEqual(presented, await secretDigest(env.RM_TOKEN)))
    return { kind: 'anonymous', rmTokenHash: tokenHash }
  const runId = await runForTokenHash(env.DB, tokenHash)
  if (!runId)
    throw new AppError(
      'unauthorized',
      'the token is not the admin token, the RM token or a live run token (unknown, or revoked)',
    )
  return { kind: 'run', runId, tokenHash }
}

/**
 * Resolves the run a request addresses — the `/runs/<id>` prefix, else the run of the caller's token,
 * else the default run — and checks the caller may use it.
 * @example api.use('*', resolveRun())
 */
export function resolveRun(): MiddlewareHandler<AppEnv> {
  return async function resolve(c, next) {
    const principal = c.get('principal')
    // A route's own `:runId` (the dashboard's run page), else the run API's `/runs/<id>` prefix (see routedPath).
    const pathRunId = c.req.param('runId') ?? runInPath(c.req.raw)
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
    if (
      runId === DEFAULT_RUN_ID &&
      c.env.DEPLOYMENT !== 'local' &&
      backendOf(agentSettingsFor(config, 'scorer')) === 'mock'
    ) {
      throw new AppError(
        'no_judge_configured',
        'the default run grades with the mock heuristic, which is no judge: ' +
          'in production create a run with a judge (POST /runs with ' +
          '"agents": {"scorer": {"backend": "openai", "base_url": …}}) and use its token, ' +
          'or give config/default-run.json a scorer before deploying',
      )
    }
    c.set('run', { id: runId, config })
    await next()
  }
}

/**
 * Lets the RM-server surface (`/rm/<target>/…`) be called: by anyone under local development (`DEPLOYMENT=local`),
 * otherwise with the admin token or the `RM_TOKEN` secret. Run tokens are refused (403): they belong to a run.
 * @example rm.use('*', requireRmAccess())
 */
export function requireRmAccess(): MiddlewareHandler<AppEnv> {
  return async function rmAccess(c, next) {
    if (c.env.DEPLOYMENT === 'local') return next()
    const principal = c.get('principal')
    if (principal.kind === 'admin' || (principal.kind === 'anonymous' && principal.rmTokenHash)) return next()
    if (principal.kind === 'run')
      throw new AppError('forbidden', 'a run token cannot call /rm/*: use the RM_TOKEN secret or the admin token')
    throw new AppError('unauthorized', '/rm/* needs a bearer token: the RM_TOKEN secret or the admin token')
  }
}

/**
 * True when two SHA-256 digests are equal, in time that does not depend on where they differ:
 * `crypto.subtle.timingSafeEqual` (workerd), else a constant-time loop.
 */
function digestsEqual(a: Uint8Array, b: Uint8Array): boolean {
  const subtle = crypto.subtle as SubtleCrypto & {
    timingSafeEqual?: (left: ArrayBufferView, right: ArrayBufferView) => boolean
  }
  if (typeof subtle.timingSafeEqual === 'function') return subtle.timingSafeEqual(a, b)
  let difference = 0
  for (let i = 0; i < a.length; i++) difference |= a[i]! ^ b[i]!
  return difference === 0
}

/** The Worker's secrets do not change while an isolate lives, so each is digested once. */
const secretDigests = new LRUCache<string, Promise<Uint8Array>>({ max: 16 })

function secretDigest(secret: string): Promise<Uint8Array> {
  let known = secretDigests.get(secret)
  if (!known) secretDigests.set(secret, (known = digest(secret)))
  return known
}

async function digest(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text)))
}

/**
 * Lets only the admin token through (a run token gets 403, no token 401).
 * @example app.post('/runs', requireAdmin(), createRunHandler)
 */
export function requireAdmin(): MiddlewareHandler<AppEnv> {
  return async function admin(c, next) {
    const principal = c.get('principal')
    if (principal.kind === 'admin') return next()
    if (!c.env.ADMIN_TOKEN) throw new AppError('forbidden', 'admin routes are disabled: set the ADMIN_TOKEN secret')
    // A run token, or the RM token (anonymous, but presented), is a valid credential for something else: 403.
    const presented = principal.kind !== 'anonymous' || c.req.header('authorization') !== undefined
    throw new AppError(presented ? 'forbidden' : 'unauthorized', 'this route needs the admin token')
  }
}
