/**
 * The answer to a path no route serves: 404 `not_found`, with the nearest route this Worker has when one is close
 * (`GET /rubric_stats` → "did you mean GET /rubrics/stats?"), so a typo costs one look at the message, not the docs.
 */
import type { Context } from 'hono'
import type { AppEnv } from '../env.ts'
import { editDistance } from '../../src/text/index.ts'
import { pathForDisplay, requestedPath } from '../middleware/path-token.ts'
import { SERVICE_INDEX } from './service-index.ts'

/** A run's routes are served at `/` and under this prefix. */
const RUN_PREFIX = /^\/runs\/[^/]+(?=\/)/

/**
 * The routes most like `path` (`METHOD /path`, run routes under the path's own `/runs/<id>` prefix when it has one):
 * the nearest, and a runner-up at most one edit further, when they are within a few edits.
 * @example nearestRoutes('GET', '/rubric_stats') // ['GET /rubric_status', 'GET /rubrics/stats']
 */
function nearestRoutes(method: string, path: string): string[] {
  const prefix = path.match(RUN_PREFIX)?.[0] ?? ''
  const candidates = [
    ...SERVICE_INDEX.run_endpoints.map((route) => ({ route, under: prefix })),
    ...(prefix ? [] : SERVICE_INDEX.endpoints.map((route) => ({ route, under: '' }))),
  ]
  const asked = path.slice(prefix.length)
  // Close enough to be a typo: a few characters, and well under the path's own length.
  const limit = Math.min(4, Math.ceil(asked.length / 3))
  const scored = candidates
    .map(({ route, under }) => {
      const [verb, pattern] = route.split(' ') as [string, string]
      const filled = concrete(pattern, asked)
      return { route: `${verb} ${under}${filled}`, distance: editDistance(asked, filled) + (verb === method ? 0 : 1) }
    })
    .filter(({ distance }) => distance > 0 && distance <= limit)
    .sort((a, b) => a.distance - b.distance)
  const best = scored[0]?.distance ?? 0
  return scored
    .filter(({ distance }) => distance <= best + 1)
    .slice(0, 2)
    .map(({ route }) => route)
}

/** A route pattern with its `:params` filled from the asked path's segments, so `/rm/prod/healthz` compares whole. */
function concrete(pattern: string, asked: string): string {
  const segments = asked.split('/')
  return pattern
    .split('/')
    .map((segment, index) => (segment.startsWith(':') ? (segments[index] ?? segment) : segment))
    .join('/')
}

/**
 * The app's `notFound` handler, and the end of a route group that owns a prefix (`/admin/*`), so a path under it that
 * no route serves is answered there, past that group's middleware only.
 * @example app.notFound(notFound)
 * @example admin.use('/admin/*', rateLimit()).post('/admin/artifacts', upload).all('/admin/*', notFound)
 */
export function notFound(c: Context<AppEnv>): Response {
  // The path as asked, run prefix included: the routed one (`c.req.path`) has none.
  const path = requestedPath(c.req.raw)
  const suggestions = nearestRoutes(c.req.method, path)
  return c.json(
    {
      error: {
        code: 'not_found',
        message:
          `no route for ${c.req.method} ${pathForDisplay(path)}` +
          (suggestions.length > 0 ? `; did you mean ${suggestions.join(' or ')}?` : ''),
      },
      request_id: c.get('requestId'),
    },
    404,
  )
}
