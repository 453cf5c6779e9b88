import type { Context, MiddlewareHandler } from 'hono'
import { deleteCookie, getCookie, setCookie } from 'hono/cookie'
import { secureHeaders } from 'hono/secure-headers'
import { AppError } from '../../src/errors/index.ts'
import { and, eq, isNull, lt } from 'drizzle-orm'
import { drizzle } from 'drizzle-orm/d1'
import { dashboardSessions } from '../../src/db/schema.ts'
import { sha256Hex } from '../../src/hash/index.ts'
import type { AppEnv, Principal } from '../env.ts'
import { randomHex, runForTokenHash } from '../runs/store.ts'
import type { ViewerInfo } from './views/layout.tsx'

/**
 * The login cookie: `<session id>.<HMAC of the id>`, never a token. HttpOnly (no script reads it), SameSite=Strict (no
 * other site sends it); the session row in D1 says whom it stands for and ends with logout or expiry.
 */
const SESSION_COOKIE = 'rh_dashboard'
/** How long a login lasts. */
const SESSION_MAX_AGE_S = 8 * 60 * 60

/** The app's variables plus who is looking at the dashboard. */
export interface DashboardEnv {
  Bindings: AppEnv['Bindings']
  Variables: AppEnv['Variables'] & { viewer: ViewerInfo }
}

/**
 * Who is looking: the `Authorization` header's principal when it names one (identifyCaller ran first), else the
 * session of the login cookie: its signature, its row (not logged out, not expired) and the token it was opened with
 * (still the admin token, or a run token not revoked). The principal is set for `resolveRun`, so a run page admits
 * exactly whom the run's API admits. A cookie that no longer stands for anyone is cleared and answered with the login
 * page (401), never with data.
 * @example pages.use('*', dashboardViewer())
 */
export function dashboardViewer(): MiddlewareHandler<DashboardEnv> {
  return async function viewer(c, next) {
    let principal = c.get('principal')
    let fromCookie = false
    const cookie = getCookie(c, SESSION_COOKIE)
    if (principal.kind === 'anonymous' && cookie !== undefined) {
      const found = await sessionPrincipal(c.env, cookie)
      if (!found) {
        endSession(c)
        throw new AppError(
          'unauthorized',
          'The login has ended (logged out, expired, or its token is no longer valid): log in again.',
        )
      }
      principal = found
      fromCookie = true
    }
    c.set('principal', principal)
    c.set('viewer', { principal, fromCookie, local: c.env.DEPLOYMENT === 'local' })
    await next()
  }
}

/**
 * Starts a session for a principal the token was just checked to be: a row in D1 and the signed id in the cookie.
 * Expired rows are deleted here, so the table holds only sessions that may still be used.
 * @example await startSession(c, token, principal); return c.redirect('/', 303)
 */
export async function startSession(
  c: Context<DashboardEnv>,
  token: string,
  principal: Exclude<Principal, { kind: 'anonymous' }>,
): Promise<void> {
  const key = await signingKey(c.env)
  const id = randomHex(16)
  const now = Date.now()
  const orm = drizzle(c.env.DB)
  await orm.batch([
    orm.delete(dashboardSessions).where(lt(dashboardSessions.expiresAt, new Date(now).toISOString())),
    orm.insert(dashboardSessions).values({
      id,
      kind: principal.kind,
      runId: principal.kind === 'run' ? principal.runId : null,
      tokenHash: await sha256Hex(token),
      createdAt: new Date(now).toISOString(),
      expiresAt: new Date(now + SESSION_MAX_AGE_S * 1_000).toISOString(),
    }),
  ])
  setCookie(c, SESSION_COOKIE, `${id}.${await sign(key, id)}`, {
    path: '/',
    httpOnly: true,
    sameSite: 'Strict',
    secure: isHttps(c),
    maxAge: SESSION_MAX_AGE_S,
  })
}

/**
 * Ends a session: its row is marked logged out (a copy of the cookie opens nothing afterwards) and the cookie cleared.
 * @example await logOut(c); return c.redirect('/dashboard/login', 303)
 */
export async function logOut(c: Context<DashboardEnv>): Promise<void> {
  const id = await verifiedSessionId(c.env, getCookie(c, SESSION_COOKIE))
  if (id)
    await drizzle(c.env.DB)
      .update(dashboardSessions)
      .set({ revokedAt: new Date().toISOString() })
      .where(eq(dashboardSessions.id, id))
  endSession(c)
}

/**
 * Clears the cookie.
 * @example endSession(c)
 */
function endSession(c: Context): void {
  deleteCookie(c, SESSION_COOKIE, { path: '/', httpOnly: true, sameSite: 'Strict', secure: isHttps(c) })
}

/** The principal a cookie's session stands for now, or undefined when it stands for nobody. */
async function sessionPrincipal(env: AppEnv['Bindings'], cookie: string): Promise<Principal | undefined> {
  const id = await verifiedSessionId(env, cookie)
  if (!id) return undefined
  const row = await drizzle(env.DB)
    .select()
    .from(dashboardSessions)
    .where(and(eq(dashboardSessions.id, id), isNull(dashboardSessions.revokedAt)))
    .get()
  if (!row || Date.parse(row.expiresAt) <= Date.now()) return undefined
  if (row.kind === 'admin')
    return env.ADMIN_TOKEN && row.tokenHash === (await sha256Hex(env.ADMIN_TOKEN)) ? { kind: 'admin' } : undefined
  const runId = await runForTokenHash(env.DB, row.tokenHash)
  return runId && runId === row.runId ? { kind: 'run', runId, tokenHash: row.tokenHash } : undefined
}

/** The session id of a well-signed cookie (the signature checked in constant time by WebCrypto). */
async function verifiedSessionId(env: AppEnv['Bindings'], cookie: string | undefined): Promise<string | undefined> {
  const match = cookie?.match(/^([0-9a-f]{32})\.([A-Za-z0-9_-]{43})$/)
  if (!match) return undefined
  const key = await signingKey(env).catch(() => undefined)
  if (!key) return undefined
  const signature = Uint8Array.from(atob(`${match[2]!.replaceAll('-', '+').replaceAll('_', '/')}=`), (char) =>
    char.charCodeAt(0),
  )
  return (await crypto.subtle.verify('HMAC', key, signature, new TextEncoder().encode(match[1]!)))
    ? match[1]
    : undefined
}

/** The HMAC key of session cookies: SESSION_SECRET, else one derived from ADMIN_TOKEN (never the token itself). */
async function signingKey(env: AppEnv['Bindings']): Promise<CryptoKey> {
  const secret = env.SESSION_SECRET ?? (env.ADMIN_TOKEN ? `dashboard-session:${env.ADMIN_TOKEN}` : undefined)
  if (!secret) throw new AppError('forbidden', 'dashboard logins need the SESSION_SECRET (or ADMIN_TOKEN) secret')
  return crypto.subtle.importKey('raw', new TextEncoder().encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, [
    'sign',
    'verify',
  ])
}

async function sign(key: CryptoKey, id: string): Promise<string> {
  const bytes = new Uint8Array(await crypto.subtle.sign('HMAC', key, new TextEncoder().encode(id)))
  return btoa(String.fromCharCode(...bytes))
    .replaceAll('+', '-')
    .replaceAll('/', '_')
    .replace(/=+$/, '')
}

function isHttps(c: Context): boolean {
  return new URL(c.req.url).protocol === 'https:'
}

/**
 * A redirect target after login: a path on this origin, else `/`. It must start with a single `/` and hold printable
 * ASCII only: no second `/` or backslash at its start (`//evil.example`, `/\evil.example`), no backslash anywhere, no
 * control character (a browser drops a tab or newline from a URL, so `/<TAB>/evil.example` would be `//evil.example`;
 * a newline or a non-ASCII character cannot go in a Location header at all). Paths the dashboard builds are
 * percent-encoded, so they pass.
 * @example safeNext('/dashboard/runs/a?q=x') // '/dashboard/runs/a?q=x'; safeNext('/\t/evil.example') // '/'
 */
export function safeNext(raw: unknown): string {
  if (typeof raw !== 'string' || raw.length > 2_000 || !SAME_ORIGIN_PATH.test(raw)) return '/'
  return raw
}

/** `/`, then anything but `/` or a backslash, then printable ASCII without a backslash; or `/` alone. */
const SAME_ORIGIN_PATH = /^\/(?:[\x21-\x2e\x30-\x5b\x5d-\x7e][\x21-\x5b\x5d-\x7e]*)?$/

/** The dashboard's header policy; the other headers `secureHeaders` knows are left unset, as before. */
const PAGE_SECURITY_HEADERS = secureHeaders({
  contentSecurityPolicy: {
    defaultSrc: ["'none'"],
    styleSrc: ["'unsafe-inline'"],
    imgSrc: ['data:'],
    formAction: ["'self'"],
    frameAncestors: ["'none'"],
    baseUri: ["'none'"],
  },
  xContentTypeOptions: true,
  referrerPolicy: 'no-referrer',
  xFrameOptions: 'DENY',
  crossOriginResourcePolicy: false,
  crossOriginOpenerPolicy: false,
  originAgentCluster: false,
  strictTransportSecurity: false,
  xDnsPrefetchControl: false,
  xDownloadOptions: false,
  xPermittedCrossDomainPolicies: false,
  xXssProtection: false,
})

/**
 * Headers every dashboard page carries: no script may run at all (the pages need none, so a planted `<script>`
 * that got past escaping would still be inert), inline styles only, no framing, no caching of run data.
 * @example pages.use('*', pageHeaders())
 */
export function pageHeaders(): MiddlewareHandler {
  return async function headers(c, next) {
    await PAGE_SECURITY_HEADERS(c, async () => {
      await next()
      c.res.headers.set('cache-control', 'no-store')
    })
  }
}
