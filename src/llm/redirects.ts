/**
 * Redirects from a judge or embedder server are followed only within its origin. `fetch` follows them by default and
 * carries every header it was given except `Authorization` (the `{secret: NAME}` headers, a Cloudflare Access
 * secret) and, on 307 and 308, the whole body (the grading prompt) to wherever `Location` points: a loopback address,
 * another host the allow-list would refuse. The configured URL passed `refuseLlmHost`; a redirect to the same origin
 * (scheme, host and port) goes where that check already looked, so it is followed with the same method and body. Any
 * other is refused naming where it pointed, and nothing is sent there.
 */
import { redactUrl } from '../credentials/index.ts'
import { LlmError } from './types.ts'

/** What is sent: the request as `fetch` takes it, without following redirects. */
export interface OutgoingRequest {
  method?: string
  headers?: Record<string, string>
  body?: string
  signal?: AbortSignal
  redirect?: 'manual'
}

/** What is read of an answer here: its status and headers, and its body to drain. */
interface RedirectReply {
  status: number
  headers: { get(name: string): string | null }
  text(): Promise<string>
}

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308])
/** Redirects followed within the origin before giving up: a trailing slash added, a path moved, not a loop. */
const MAX_REDIRECTS = 3

/**
 * `send(url, init)` with redirects followed only within `url`'s origin (up to {@link MAX_REDIRECTS}); a redirect
 * elsewhere throws a `bad_request` LlmError (never retried) naming `server` and the redirect's target, redacted.
 * @example const reply = await sendWithinOrigin(fetch, `${base}/chat/completions`, init, 'the model server')
 */
export async function sendWithinOrigin<R extends RedirectReply>(
  send: (url: string, init: OutgoingRequest) => Promise<R>,
  url: string,
  init: OutgoingRequest,
  server: string,
): Promise<R> {
  const origin = new URL(url).origin
  let target = url
  for (let hops = 0; ; hops++) {
    const reply = await send(target, { ...init, redirect: 'manual' })
    const location = REDIRECT_STATUSES.has(reply.status) ? reply.headers.get('location') : null
    if (location === null) return reply
    await reply.text().catch(() => '')
    let next: URL
    try {
      next = new URL(location, target)
    } catch {
      throw new LlmError('bad_request', `${server} answered HTTP ${reply.status} with a Location that is no URL`)
    }
    if (next.origin !== origin)
      throw new LlmError(
        'bad_request',
        `${server} at ${origin} redirected (HTTP ${reply.status}) to ${redactUrl(next.toString())}, another origin: ` +
          'this server does not follow it, since the request would carry its keys, secret headers and prompt there; ' +
          "configure the endpoint's final URL",
      )
    if (hops >= MAX_REDIRECTS)
      throw new LlmError('bad_request', `${server} redirected more than ${MAX_REDIRECTS} times within ${origin}`)
    target = next.toString()
  }
}
