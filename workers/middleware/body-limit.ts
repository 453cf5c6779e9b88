import type { MiddlewareHandler } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import { AppError } from '../../src/errors/index.ts'
import type { AppEnv } from '../env.ts'

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
 * Reads what is left of a request body its answer did not need (a refusal, an unknown route) before the answer goes
 * out: a body left unread closes the connection under it, and a keep-alive client loses its next request on it. An
 * oversized body (413) is never read; any other is bounded by its route's limit ({@link limitBodies}).
 * @example app.use('*', drainUnreadBodies()).use('*', limitBodies())
 */
export function drainUnreadBodies(): MiddlewareHandler<AppEnv> {
  return async function drainUnreadBody(c, next) {
    await next()
    if (c.res.status !== 413 && c.req.raw.body && !c.req.raw.bodyUsed)
      await c.req.raw.arrayBuffer().catch(() => undefined)
  }
}
