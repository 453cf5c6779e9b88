import { getPath } from 'hono/utils/url'

/**
 * `/t/<token>` before any route: how a client that cannot set headers (OpenRLHF, slime, autosr's RM client) sends its
 * token.
 */
const PATH_TOKEN = /^\/t\/([^/]+)(?=\/|$)/

/**
 * `/runs/<id>` before a run API path: the run it addresses. Not before `tokens` (the admin's `/runs/:runId/tokens`
 * routes), nor alone or before a bare `/` (no run API route is `/`).
 */
const RUN_PREFIX = /^\/runs\/([^/]+)(?=\/(?!tokens(?:\/|$))[^/])/

/**
 * The path a request asked for, without a leading `/t/<token>`: what messages about the path echo (with
 * {@link pathForDisplay}).
 * @example requestedPath(new Request('http://x/t/rh_abc/runs/grpo-1/score')) // '/runs/grpo-1/score'
 */
export function requestedPath(request: Request): string {
  return getPath(request).replace(PATH_TOKEN, '') || '/'
}

/**
 * The path the app routes on: the request's path without a leading `/t/<token>`, and without a `/runs/<id>` prefix,
 * so every route is also served under `/t/<token>/…` and the run API (mounted once, at `/`) under `/runs/<id>/…`,
 * whose run `resolveRun` takes from {@link runInPath}. The app's `getPath`.
 * @example routedPath(new Request('http://x/t/rh_abc/compat/openrlhf')) // '/compat/openrlhf'
 * @example routedPath(new Request('http://x/runs/grpo-1/score')) // '/score'
 */
export function routedPath(request: Request): string {
  return requestedPath(request).replace(RUN_PREFIX, '')
}

/**
 * The run a request's `/runs/<id>/…` prefix names (decoded, as a route parameter would be), or undefined.
 * @example runInPath(new Request('http://x/runs/grpo-1/score')) // 'grpo-1'
 */
export function runInPath(request: Request): string | undefined {
  return decoded(RUN_PREFIX.exec(requestedPath(request))?.[1])
}

/**
 * The token a request carries in its path (`/t/<token>/…`), or undefined.
 * @example pathToken(new Request('http://x/t/rh_abc/score')) // 'rh_abc'
 */
export function pathToken(request: Request): string | undefined {
  return decoded(PATH_TOKEN.exec(getPath(request))?.[1])
}

function decoded(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined
  try {
    return decodeURIComponent(raw)
  } catch {
    return raw
  }
}

/**
 * A routed path as it may be echoed in a message: every `t/<segment>` masked, since a path may carry a second token
 * (`/t/<A>/t/<B>/…` routes as `/t/<B>/…`), and a message must never carry one.
 * @example pathForDisplay('/t/rh_secret/score') // '/t/<token>/score'
 */
export function pathForDisplay(path: string): string {
  return path.replace(/(^|\/)t\/[^/]+/g, '$1t/<token>')
}
