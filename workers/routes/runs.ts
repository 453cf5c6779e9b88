import { Hono } from 'hono'
import { AppError } from '../../src/errors/index.ts'
import { CreateRunRequest } from '../../src/schemas/run-config.ts'
import type { AppEnv } from '../env.ts'
import { requireAdmin } from '../middleware/auth.ts'
import { jsonBody } from '../middleware/json-body.ts'
import { checkRunSecrets } from '../scoring/models.ts'
import { createRun, DEFAULT_RUN_ID, randomHex } from '../runs/store.ts'

/**
 * `POST /runs` (admin) — create a run; the answer carries its bearer token, shown this once.
 */
export const runAdminRoutes = new Hono<AppEnv>().post('/runs', requireAdmin(), jsonBody(CreateRunRequest), async (c) => {
  const { run_id: requested, config } = c.get('body')
  const runId = requested ?? `run-${randomHex(6)}`
  checkRunSecrets(c.env, config)
  if (runId === DEFAULT_RUN_ID) throw new AppError('run_exists', 'the default run is configured in config/default-run.json')
  const created = await createRun(c.env.DB, runId, config)
  if ('exists' in created) throw new AppError('run_exists', `a run named "${runId}" already exists`)
  return c.json({ run_id: runId, token: created.token, config, base_path: `/runs/${runId}` }, 201)
})

/** `GET /run` — the addressed run's config (no secrets live in it). */
export const runInfoRoutes = new Hono<AppEnv>().get('/run', (c) => {
  const run = c.get('run')
  return c.json({ run_id: run.id, config: run.config })
})
