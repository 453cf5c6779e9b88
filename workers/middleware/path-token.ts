import { getPath } from 'hono/utils/url'

/**
 * `/t/<token>` before any route: how a client that cannot set headers (OpenRLHF, slime, autosr's RM client) sends its
 * token.
 */
const PATH_TOKEN = /^\/t\/([^/]+)(?=\/|$)/

/**
 * The path the app routes on: the request's path without a leading `/t/<token>`, so every route is also served
 * under `/t/<token>/…`. The app's `getPath`.
 * @example routedPath(new Request('http://x/t/rh_abc/compat/openrlhf')) // '/compat/openrlhf'
 */
export function routedPath(request: Request): string {
  const path = getPath(request)
  return path.replace(PATH_TOKEN, '') || '/'
}

/**
 * The token a request carries in its path (`/t/<token>/…`), or undefined.
 * @example pathToken(new Request('http://x/t/rh_abc/score')) // 'rh_abc'
 */
export function pathToken(request: Request): string | undefined {
  const raw = PATH_TOKEN.exec(getPath(request))?.[1]
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
