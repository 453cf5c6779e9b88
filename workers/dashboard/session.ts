import type { Context, MiddlewareHandler } from 'hono'
import { deleteCookie, getCookie, setCookie } from 'hono/cookie'
import { AppError } from '../../src/errors/index.ts'
import type { AppEnv } from '../env.ts'
import { principalFor } from '../middleware/auth.ts'
import type { ViewerInfo } from './views/layout.tsx'

/** The login cookie: the token itself, HttpOnly (no script reads it) and SameSite=Strict (no other site sends it). */
export const SESSION_COOKIE = 'rh_dashboard'
/** How long a login lasts. */
const SESSION_MAX_AGE_S = 8 * 60 * 60

/** The app's variables plus who is looking at the dashboard. */
export interface DashboardEnv {
  Bindings: AppEnv['Bindings']
  Variables: AppEnv['Variables'] & { viewer: ViewerInfo }
}

/**
 * Who is looking: the `Authorization` header's principal when it names one (identifyCaller ran first), else the
 * token in the login cookie, checked by the very code the API uses (`principalFor`). The principal is set for
 * `resolveRun`, so a run page admits exactly whom the run's API admits. A cookie whose token is no longer valid is
 * cleared and answered with the login page (401), never with data.
 * @example pages.use('*', dashboardViewer())
 */
export function dashboardViewer(): MiddlewareHandler<DashboardEnv> {
  return async function viewer(c, next) {
    let principal = c.get('principal')
    let fromCookie = false
    const token = getCookie(c, SESSION_COOKIE)
    if (principal.kind === 'anonymous' && token !== undefined) {
      try {
        principal = await principalFor(c.env, `Bearer ${token}`)
        fromCookie = true
      } catch (error) {
        if (!(error instanceof AppError && error.code === 'unauthorized')) throw error
        endSession(c)
        throw new AppError('unauthorized', 'The saved token is not valid any more: log in again.')
      }
    }
    c.set('principal', principal)
    c.set('viewer', { principal, fromCookie, local: c.env.DEPLOYMENT === 'local' })
    await next()
  }
}

/**
 * Starts a session: the token goes into the HttpOnly cookie (Secure over https).
 * @example startSession(c, token); return c.redirect('/', 303)
 */
export function startSession(c: Context, token: string): void {
  setCookie(c, SESSION_COOKIE, token, { path: '/', httpOnly: true, sameSite: 'Strict', secure: isHttps(c), maxAge: SESSION_MAX_AGE_S })
}

/**
 * Ends a session: the cookie is cleared.
 * @example endSession(c); return c.redirect('/dashboard/login', 303)
 */
export function endSession(c: Context): void {
  deleteCookie(c, SESSION_COOKIE, { path: '/', httpOnly: true, sameSite: 'Strict', secure: isHttps(c) })
}

function isHttps(c: Context): boolean {
  return new URL(c.req.url).protocol === 'https:'
}

/**
 * A redirect target after login: a path on this origin, else `/` (never `//evil.example` or an absolute URL).
 * @example safeNext('/dashboard/runs/a?q=x') // '/dashboard/runs/a?q=x'
 */
export function safeNext(raw: unknown): string {
  if (typeof raw !== 'string' || raw.length > 2_000 || !raw.startsWith('/') || raw.startsWith('//') || raw.includes('\\')) return '/'
  return raw
}

/**
 * Headers every dashboard page carries: no script may run at all (the pages need none, so a planted `<script>`
 * that got past escaping would still be inert), inline styles only, no framing, no caching of run data.
 * @example pages.use('*', pageHeaders())
 */
export function pageHeaders(): MiddlewareHandler {
  return async function headers(c, next) {
    await next()
    c.res.headers.set('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
    c.res.headers.set('cache-control', 'no-store')
    c.res.headers.set('x-content-type-options', 'nosniff')
    c.res.headers.set('referrer-policy', 'no-referrer')
    c.res.headers.set('x-frame-options', 'DENY')
  }
}
