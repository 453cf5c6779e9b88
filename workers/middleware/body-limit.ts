import type { MiddlewareHandler } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import { AppError } from '../../src/errors/index.ts'
import type { AppEnv } from '../env.ts'
import { isHealthPath } from './rate-limit.ts'

const MIB = 1024 * 1024

/**
 * The largest body each kind of route takes. Batch routes carry a trainer's whole rollout batch (OpenRLHF up to 0.9
 * sends one per reward URL: 2–16 MB is usual); a single rollout may hold 200,000-character texts that clients send
 * `\u`-escaped (6 bytes a character); everything else is small.
 */
export const BODY_LIMITS = { batch: 16 * MIB, rollout: 4 * MIB, other: MIB } as const
export type BodyLimitKind = keyof typeof BODY_LIMITS

const BATCH_ROUTE = /(?:^|\/)(?:compat\/openrlhf|score\/batch|score\/group|batch_score)\/?$/
const ROLLOUT_ROUTE = /(?:^|\/)(?:score|compat\/slime)\/?$/

/**
 * Which limit a path falls under.
 * @example bodyLimitKind('/runs/grpo-1/compat/openrlhf') // 'batch'
 */
export function bodyLimitKind(pathname: string): BodyLimitKind {
  if (BATCH_ROUTE.test(pathname)) return 'batch'
  if (ROLLOUT_ROUTE.test(pathname) && !pathname.startsWith('/rm/')) return 'rollout'
  return 'other'
}

const HOW_TO_SPLIT: Record<BodyLimitKind, string> = {
  batch: 'send the batch in several requests (OpenRLHF: more reward URLs; /score/batch: fewer items per call)',
  rollout: 'shorten the texts, or send large images by url',
  other: 'send rollouts to POST /score/batch, which takes up to 16 MiB',
}

/**
 * Refuses a body over its route's limit ({@link BODY_LIMITS}) with 413 `payload_too_large`, saying which limit was hit
 * and how to split; announced (`content-length`) or streamed.
 * @example app.use('*', limitBodies())
 */
export function limitBodies(): MiddlewareHandler<AppEnv> {
  const limiters = Object.fromEntries(
    (Object.keys(BODY_LIMITS) as BodyLimitKind[]).map((kind) => [
      kind,
      bodyLimit({
        maxSize: BODY_LIMITS[kind],
        onError: () => {
          throw new AppError(
            'payload_too_large',
            `the request body is larger than ${BODY_LIMITS[kind] / MIB} MiB, the limit of this route: ` +
              HOW_TO_SPLIT[kind],
            {
              details: { limit_bytes: BODY_LIMITS[kind], kind },
            },
          )
        },
      }),
    ]),
  ) as Record<BodyLimitKind, MiddlewareHandler>
  return function limitBody(c, next) {
    return limiters[bodyLimitKind(c.req.path)](c, next)
  }
}

/**
 * The most of an unread body an answer still reads so that a keep-alive client keeps its connection: a request with a
 * small body to an unknown route, or one answered before its handler needed the body. Larger (or unannounced and
 * longer) bodies are left unread and the connection is closed.
 */
export const MAX_DRAINED_BYTES = 128 * 1024

/**
 * Answers about the caller itself (no or a wrong credential, a valid one for something else, a spent budget, a body
 * over the limit): their body is never read, whatever its size, and the connection is closed.
 */
const REFUSALS = new Set([401, 403, 413, 429])

/**
 * What happens to a request body the answer did not read. A body left unread closes the connection under it, and a
 * keep-alive client that was not told loses its next request on it. So:
 * - a refusal ({@link REFUSALS}) and a health probe read nothing: the body is cancelled and the answer says
 *   `Connection: close`, so the client opens a fresh connection for its next request;
 * - any other answer reads what is left when the body announces at most {@link MAX_DRAINED_BYTES}
 *   (`content-length`), and keeps the connection; a larger or unannounced (chunked) body is cancelled unread, with
 *   `Connection: close`.
 * @example app.use('*', drainUnreadBodies()).use('*', limitBodies())
 */
export function drainUnreadBodies(): MiddlewareHandler<AppEnv> {
  return async function drainUnreadBody(c, next) {
    await next()
    const { body } = c.req.raw
    if (!body || c.req.raw.bodyUsed) return
    const refusal = REFUSALS.has(c.res.status) || isHealthPath(c.req.path)
    const announced = Number(c.req.header('content-length') ?? Number.NaN)
    // The runtime holds the body to its announced length, so reading it reads at most MAX_DRAINED_BYTES.
    if (!refusal && announced <= MAX_DRAINED_BYTES) {
      await c.req.raw.arrayBuffer().catch(() => undefined)
      return
    }
    await body.cancel().catch(() => undefined)
    c.res = new Response(c.res.body, c.res)
    c.res.headers.set('connection', 'close')
  }
}
