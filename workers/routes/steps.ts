import { Hono } from 'hono'
import { AppError } from '../../src/errors/index.ts'
import type { AppEnv } from '../env.ts'
import { objects } from '../objects/call.ts'

/** Used when `/rubric_status/wait` names no timeout. */
const DEFAULT_WAIT_S = 30

/**
 * Step control: `POST /complete`, `GET /rubric_status`, `GET /rubric_status/wait?timeout_s=N`, and `GET /llm_calls`
 * (the run's LLM calls by role, model and outcome, summed over its steps). The wait is clamped to the run's
 * `max_wait_s` (300 s unless configured); on timeout it answers 202.
 */
export const stepRoutes = new Hono<AppEnv>()
  .post('/complete', async (c) => {
    const run = c.get('run')
    return c.json(await objects.coordinator(c.env, run.id, (coordinator) => coordinator.complete()))
  })
  .get('/rubric_status', async (c) => {
    const run = c.get('run')
    return c.json(await objects.coordinator(c.env, run.id, (coordinator) => coordinator.status()))
  })
  .get('/llm_calls', async (c) => {
    const run = c.get('run')
    const groups = await objects.coordinator(c.env, run.id, (coordinator) => coordinator.llmCalls())
    return c.json({
      run_id: run.id,
      calls: groups.map(({ latency_ms, ...group }) => ({
        ...group,
        mean_latency_ms: group.calls ? Math.round(latency_ms / group.calls) : 0,
      })),
    })
  })
  .get('/rubric_status/wait', async (c) => {
    const run = c.get('run')
    const raw = c.req.query('timeout_s')
    // A decimal number (exponent allowed: Python may send 1e-05); Number() alone would read '', ' ' and '0x10'.
    const requested =
      raw === undefined ? DEFAULT_WAIT_S : /^\+?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(raw) ? Number(raw) : NaN
    if (!Number.isFinite(requested) || requested < 0) {
      throw new AppError('invalid_request', `timeout_s must be a number of seconds ≥ 0 (got "${raw}")`)
    }
    const timeoutS = Math.min(requested, run.config.max_wait_s)
    const deadline = Date.now() + timeoutS * 1_000
    // A reset of the coordinator (a deploy) drops its waiters: the call is made again on a fresh object for what is
    // left of the time.
    const { done, status } = await objects.coordinator(c.env, run.id, (coordinator) =>
      coordinator.waitForUpdate(Math.max(0, deadline - Date.now())),
    )
    if (done) return c.json({ ...status, status: 'updated' as const, mode: run.config.mode, waited_s_max: timeoutS })
    return c.json({ ...status, mode: run.config.mode, waited_s_max: timeoutS, timed_out: true }, 202)
  })
