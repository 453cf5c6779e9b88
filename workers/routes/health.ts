import { Hono } from 'hono'
import type { AppEnv } from '../env.ts'
import { requireAdmin } from '../middleware/auth.ts'
import { leaveBodyUnread } from '../middleware/body-limit.ts'
import { rateLimit } from '../middleware/rate-limit.ts'

/**
 * `GET /healthz` — liveness: answers from the isolate alone (no D1, no Durable Object), so probing it costs nothing:
 * it declares no `rateLimit` (never limited) and leaves its body unread. `GET /healthz/deep` (admin) adds a D1 round
 * trip, so a broken binding shows there first.
 */
export const healthRoutes = new Hono<AppEnv>()
  // Whatever the method: a probe's body is never read.
  .use('/healthz', leaveBodyUnread())
  .get('/healthz', (c) => c.json({ status: 'ok', deployment: c.env.DEPLOYMENT === 'local' ? 'local' : 'production' }))
  .get('/healthz/deep', rateLimit(), requireAdmin(), async (c) => {
    const started = Date.now()
    await c.env.DB.prepare('SELECT 1').first()
    return c.json({
      status: 'ok',
      deployment: c.env.DEPLOYMENT === 'local' ? 'local' : 'production',
      d1_ms: Date.now() - started,
    })
  })
