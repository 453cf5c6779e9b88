import { Hono } from 'hono'
import { requestId } from 'hono/request-id'
import type { AppEnv } from './env.ts'
import { identifyCaller, resolveRun } from './middleware/auth.ts'
import { drainUnreadBodies } from './middleware/body-limit.ts'
import { routedPath } from './middleware/path-token.ts'
import { notFound } from './routes/not-found.ts'
import { rateLimit } from './middleware/rate-limit.ts'
import { renderError } from './middleware/errors.ts'
import { dashboardRoutes } from './dashboard/index.ts'
import { artifactAdminRoutes } from './routes/admin-artifacts.ts'
import { archiveRoutes } from './routes/archive.ts'
import { compatRoutes } from './routes/compat.ts'
import { healthRoutes } from './routes/health.ts'
import { lineageRoutes } from './routes/lineage.ts'
import { memoryRoutes } from './routes/memory.ts'
import { rubricRoutes } from './routes/rubrics.ts'
import { rmRoutes } from './routes/rm.ts'
import { runAdminRoutes, runInfoRoutes, runTokenRoutes } from './routes/runs.ts'
import { scoreRoute } from './routes/score.ts'
import { runJudgeRoutes } from './routes/judge-proxy.ts'
import { stepRoutes } from './routes/steps.ts'

/**
 * The routes every run serves, mounted once, at `/`: a request addresses the run of the caller's token, else the
 * default run (what an AMARIS-style client expects), or the run its `/runs/<id>/` prefix names (the app routes on the
 * path without it, `routedPath`; `resolveRun` reads it). Each counts against the resolved run's rate-limit tier; each
 * route that takes a body declares its limit (`limitBody`).
 */
const runApi = new Hono<AppEnv>()
  .use('*', resolveRun(), rateLimit())
  .route('/', scoreRoute)
  .route('/', stepRoutes)
  .route('/', rubricRoutes)
  .route('/', memoryRoutes)
  .route('/', runInfoRoutes)
  .route('/', compatRoutes)
  .route('/', archiveRoutes)
  .route('/v1', runJudgeRoutes)

/**
 * Builds the Worker's Hono app.
 * @example export default { fetch: createApp().fetch }
 */
export function createApp() {
  return (
    new Hono<AppEnv>({ getPath: routedPath })
      .use('*', requestId())
      .use('*', drainUnreadBodies())
      .use('*', identifyCaller())
      .route('/', healthRoutes)
      .route('/', runAdminRoutes)
      .route('/', runTokenRoutes)
      // Before the run API, whose run resolution matches every path: artifacts and RM targets belong to no run. Each
      // group that owns a prefix answers its unknown paths itself, so none passes the run API's rate limiter too.
      .route('/', artifactAdminRoutes)
      .route('/', lineageRoutes)
      // `GET /` serves a browser the dashboard (API clients get JSON) and `/dashboard/*` its pages; before the run API
      // too.
      .route('/', dashboardRoutes)
      .route('/rm/:target', rmRoutes)
      .route('/', runApi)
      .notFound(notFound)
      .onError(renderError)
  )
}
