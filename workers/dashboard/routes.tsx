import type { Context } from 'hono'
import { Hono } from 'hono'
import { z } from 'zod'
import { csrf } from 'hono/csrf'
import { HTTPException } from 'hono/http-exception'
import { AppError } from '../../src/errors/index.ts'
import { LlmError } from '../../src/llm/index.ts'
import { principalFor, resolveRun } from '../middleware/auth.ts'
import { renderError, toAppError } from '../middleware/errors.ts'
import { pathForDisplay } from '../middleware/path-token.ts'
import { limitBody } from '../middleware/body-limit.ts'
import { countRefusedCredential, rateLimit } from '../middleware/rate-limit.ts'
import { searchSpend } from '../memory/search-budget.ts'
import { MemoryKindParam, MemorySearchParam } from '../routes/memory.ts'
import { InstanceIdParam } from '../routes/rubrics.ts'
import { validQuery } from '../middleware/query.ts'
import { loadRunDashboard, loadTargets, visibleRuns } from './data.ts'
import { dashboardViewer, logOut, pageHeaders, safeNext, startSession, type DashboardEnv } from './session.ts'
import { ErrorPage } from './views/error.tsx'
import { HomePage } from './views/home.tsx'
import { canSeeTargets } from './views/layout.tsx'
import { LoginPage } from './views/login.tsx'
import { RunPage } from './views/run.tsx'
import { TargetsPage } from './views/targets.tsx'
import { SERVICE_INDEX } from '../routes/service-index.ts'

/** An empty form field counts as absent. */
const blankAsAbsent = (value: unknown) => (value === '' ? undefined : value)

/** The query of a run's page: its memory search and instance, from a form (an empty field is sent as ''). */
const RunPageQuery = z.object({
  q: MemorySearchParam.optional(),
  kind: z.preprocess(blankAsAbsent, MemoryKindParam.optional()),
  instance: z.preprocess(blankAsAbsent, InstanceIdParam.optional()),
})

/**
 * The pages under `/dashboard/`: login and logout, a run's page, and the artifacts and deployments of every target.
 * Errors render as pages; a missing or invalid token is the login form (401), never data.
 */
const pages = new Hono<DashboardEnv>()
  .use('*', rateLimit(), pageHeaders(), dashboardViewer())
  .get('/', (c) => c.redirect('/', 302))
  .get('/login', (c) => c.html(<LoginPage next={safeNext(c.req.query('next'))} />))
  .post('/login', csrf(), limitBody('other'), async (c) => {
    const form = await c.req.parseBody()
    const next = safeNext(form.next)
    const token = typeof form.token === 'string' ? form.token.trim() : ''
    // A JSON client gets the API's JSON error (renderPageError), a browser the form again.
    const refuse = (code: 'invalid_request' | 'unauthorized', message: string) => {
      if (wantsJson(c)) throw new AppError(code, `${message} The login takes a form field "token".`)
      return c.html(<LoginPage next={next} error={message} />, code === 'unauthorized' ? 401 : 400)
    }
    if (token === '') return refuse('invalid_request', 'Enter the admin token or a run token.')
    const principal = await principalFor(c.env, `Bearer ${token}`).catch((error: unknown) => {
      if (error instanceof AppError && error.code === 'unauthorized') return undefined
      throw error
    })
    // The RM token is valid for /rm/* only: it names no run, so it opens nothing here.
    if (principal === undefined || principal.kind === 'anonymous') {
      // A wrong token here is a guess like one in a header: it counts against the address's refused-credential budget.
      if (principal === undefined) await countRefusedCredential(c.env, c.req.header('cf-connecting-ip'))
      return refuse('unauthorized', 'That token is neither the admin token nor a run token.')
    }
    await startSession(c, token, principal)
    return c.redirect(next, 303)
  })
  .post('/logout', csrf(), limitBody('other'), async (c) => {
    await logOut(c)
    return c.redirect('/dashboard/login', 303)
  })
  .get('/targets', async (c) => {
    const viewer = c.get('viewer')
    if (!canSeeTargets(viewer)) {
      if (viewer.principal.kind === 'anonymous')
        throw new AppError('unauthorized', 'Artifacts and deployments need the admin token.')
      throw new AppError(
        'forbidden',
        'Artifacts and deployments belong to no run: they need the admin token, not a run token.',
      )
    }
    return c.html(<TargetsPage viewer={viewer} {...(await loadTargets(c.env.DB))} />)
  })
  .get('/runs/:runId', resolveRun(), validQuery(RunPageQuery), async (c) => {
    const { q, kind, instance } = c.req.valid('query')
    const data = await loadRunDashboard(c.env, c.get('run'), {
      ...(instance ? { instance } : {}),
      memory: { ...(q?.trim() ? { q: q.trim() } : {}), ...(kind ? { kind } : {}) },
      spendSearch: searchSpend(c.env.DB, c.get('viewer').principal, c.get('run')),
    })
    return c.html(<RunPage viewer={c.get('viewer')} data={data} />)
  })
  .all('*', (c) => {
    throw new AppError('not_found', `There is no dashboard page at ${pathForDisplay(c.req.path)}.`)
  })
  .onError(renderPageError)

/**
 * The dashboard, mounted at `/` before the run API: `GET /` (the runs index for a browser, a small JSON index for
 * anyone else) and the pages under `/dashboard/`.
 * @example app.route('/', dashboardRoutes)
 */
export const dashboardRoutes = new Hono<DashboardEnv>()
  .get(
    '/',
    rateLimit(),
    // Content negotiation: only a client asking for HTML gets the dashboard; API clients keep getting JSON.
    async (c, next) =>
      /\btext\/html\b/i.test(c.req.header('accept') ?? '')
        ? next()
        : c.json({ ...SERVICE_INDEX, request_id: c.get('requestId') }),
    pageHeaders(),
    dashboardViewer(),
    async (c) => {
      const viewer = c.get('viewer')
      if (viewer.principal.kind === 'anonymous' && !viewer.local)
        throw new AppError('unauthorized', 'The dashboard needs the admin token or a run token.')
      return c.html(<HomePage viewer={viewer} runs={await visibleRuns(c.env, viewer.principal)} />)
    },
  )
  .route('/dashboard', pages)
  .onError(renderPageError)

/**
 * True when a request is a JSON client's: its Accept asks for JSON and not for HTML, or it sends a JSON body and does
 * not ask for HTML.
 * @example wantsJson(c) // true for `Accept: application/json`, and for a JSON POST with `Accept: *\/*`
 */
function wantsJson(c: Context): boolean {
  const json = /\bapplication\/(?:[\w.+-]+\+)?json\b/i
  const accept = c.req.header('accept') ?? ''
  if (/\btext\/html\b/i.test(accept)) return false
  return json.test(accept) || json.test(c.req.header('content-type') ?? '')
}

/**
 * Errors as pages (JSON for a client that asks for JSON): 401 is the login form (it returns to the page asked for),
 * anything else an error page with the code and the request id. Unknown errors are a 500 that reveals nothing and is
 * logged, as in the API.
 * @example pages.onError(renderPageError)
 */
function renderPageError(caught: Error, c: Context<DashboardEnv>): Response | Promise<Response> {
  // A client that asks for JSON (and not for a page) gets the API's JSON error, as from every other route.
  if (wantsJson(c)) return renderError(caught, c)
  // An upstream model's failure is the API's llm_unavailable here too, not an internal error.
  const error = caught instanceof LlmError ? toAppError(caught) : caught
  const requestId = c.get('requestId') ?? 'unknown'
  const viewer = c.get('viewer')
  const url = new URL(c.req.url)
  if (error instanceof AppError && error.code === 'unauthorized') {
    // The routed path is decoded (and has no /t/<token>); encoded again, a run id with a space still comes back.
    const next = c.req.method === 'GET' ? safeNext(encodeURI(c.req.path) + url.search) : '/'
    return c.html(<LoginPage next={next} message={error.message} />, 401)
  }
  if (error instanceof AppError && error.retryAfterSeconds !== undefined)
    c.header('retry-after', String(Math.ceil(error.retryAfterSeconds)))
  if (error instanceof AppError)
    return c.html(
      <ErrorPage
        status={error.status}
        code={error.code}
        message={error.message}
        requestId={requestId}
        viewer={viewer}
      />,
      error.status as 400,
    )
  if (error instanceof HTTPException) {
    const code = error.status === 403 ? 'forbidden' : error.status === 413 ? 'payload_too_large' : 'invalid_request'
    return c.html(
      <ErrorPage
        status={error.status}
        code={code}
        message={error.message || 'The request was refused.'}
        requestId={requestId}
        viewer={viewer}
      />,
      error.status,
    )
  }
  console.error(`[${requestId}]`, error)
  return c.html(
    <ErrorPage
      status={500}
      code="internal"
      message="Internal error; the request id identifies it in the logs."
      requestId={requestId}
      viewer={viewer}
    />,
    500,
  )
}
