import { Hono } from 'hono'
import type { AppEnv } from '../env.ts'

/** `GET /healthz` — liveness plus a D1 round trip, so a broken binding shows here first. */
export const healthRoutes = new Hono<AppEnv>().get('/healthz', async (c) => {
  const started = Date.now()
  await c.env.DB.prepare('SELECT 1').first()
  return c.json({ status: 'ok', deployment: c.env.DEPLOYMENT === 'local' ? 'local' : 'production', d1_ms: Date.now() - started })
})
