import type { MiddlewareHandler } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import { AppError } from '../../src/errors/index.ts'
import type { AppEnv } from '../env.ts'

const MIB = 1024 * 1024

/**
 * The largest body each kind of route takes. Batch routes carry a trainer's whole rollout batch (OpenRLHF up to 0.9
 * sends one per reward URL: 2–16 MB is usual); a single rollout may hold 200,000-character texts that clients send
 * `\u`-escaped (6 bytes a character); everything else is small.
 * @internal
 */
export const BODY_LIMITS = { batch: 16 * MIB, rollout: 4 * MIB, other: MIB } as const
export type BodyLimitKind = keyof typeof BODY_LIMITS

const HOW_TO_SPLIT: Record<BodyLimitKind, string> = {
  batch: 'send the batch in several requests (OpenRLHF: more reward URLs; /score/batch: fewer items per call)',
  rollout: 'shorten the texts, or send large images by url',
  other: 'send rollouts to POST /score/batch, which takes up to 16 MiB',
}

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
          { details: { limit_bytes: BODY_LIMITS[kind], kind } },
        )
      },
    }),
  ]),
) as Record<BodyLimitKind, MiddlewareHandler<AppEnv>>

/**
 * Hono's `bodyLimit` at the limit of a kind of route ({@link BODY_LIMITS}), declared on each route that takes a body:
 * a body over it is refused with 413 `payload_too_large`, saying which limit was hit and how to split; announced
 * (`content-length`, refused unread) or streamed (refused once the stream passes the limit).
 * @example scoreRoute.post('/score/batch', limitBody('batch'), jsonBody(ScoreBatchRequest), handler)
 */
export function limitBody(kind: BodyLimitKind): MiddlewareHandler<AppEnv> {
  return limiters[kind]
}

/**
 * Marks a route whose request body is never read, not even drained after the answer: a health probe, which must cost
 * the isolate nothing whatever it carries.
 * @example healthRoutes.use('/healthz', leaveBodyUnread()).get('/healthz', (c) => c.json({ status: 'ok' }))
 */
export function leaveBodyUnread(): MiddlewareHandler<AppEnv> {
  return async function markBodyUnread(c, next) {
    c.set('leaveBodyUnread', true)
    await next()
  }
}

/**
 * The most of an unread body an answer still reads, after it was decided without the body, so that a keep-alive
 * client keeps its connection: a small request refused, sent to an unknown route, or answered before its handler
 * needed the body. A larger (or unannounced) body is never read by the Worker.
 * @internal
 */
export const MAX_DRAINED_BYTES = 128 * 1024

/**
 * What happens to a request body the answer did not read. Every refusal (no or a wrong credential, 413, 429) is
 * decided before any byte of it is read. Then a body that announces at most {@link MAX_DRAINED_BYTES}
 * (`content-length`) is read to its end, because a body left unread spoils the connection under it (workerd answers
 * the keep-alive client's next request on it with an error); a larger or unannounced (chunked) body is left unread,
 * to the runtime (wrangler dev takes it in itself and keeps the connection; workerd alone closes the connection after
 * the answer: see docs/security.md). A route marked with {@link leaveBodyUnread} (a health probe) reads nothing at all.
 * @example app.use('*', drainUnreadBodies())
 */
export function drainUnreadBodies(): MiddlewareHandler<AppEnv> {
  return async function drainUnreadBody(c, next) {
    await next()
    if (!c.req.raw.body || c.req.raw.bodyUsed) return
    const announced = Number(c.req.header('content-length') ?? Number.NaN)
    // The runtime holds a body to its announced length, so this reads at most MAX_DRAINED_BYTES.
    // A larger one is left alone: cancelling it closed the connection before a client still sending had read the
    // answer (a reset, or a 503 from wrangler dev's proxy).
    if (c.get('leaveBodyUnread')) return
    if (announced <= MAX_DRAINED_BYTES && c.res.status !== 413) await c.req.raw.arrayBuffer().catch(() => undefined)
    else if (c.res.status === 413 && announced <= Number(c.env.DRAIN_REFUSED_BODY_BYTES ?? 0))
      // Read and dropped chunk by chunk, never held: the client gets its 413 instead of a reset. Only a 413: it comes
      // after the caller's credential was accepted, so an anonymous caller never makes the Worker read its body.
      await c.req.raw.body.pipeTo(new WritableStream()).catch(() => undefined)
  }
}
