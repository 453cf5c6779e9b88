import { Hono } from 'hono'
import { z } from 'zod'
import { DETAILED_STEPS } from '../../durable-objects/run-coordinator/index.ts'
import { budgetError } from '../../src/budgets/index.ts'
import { AppError } from '../../src/errors/index.ts'
import { redactUrl } from '../../src/credentials/index.ts'
import type { AppEnv } from '../env.ts'
import { limitBody } from '../middleware/body-limit.ts'
import { integerParam, secondsParam, validQuery } from '../middleware/query.ts'
import { objects } from '../objects/call.ts'

/** Used when `/rubric_status/wait` names no timeout. */
const DEFAULT_WAIT_S = 30

/** The query of `/rubric_status`: `step` names a step still kept (else the step the trainer is told about). */
const StatusQuery = z.object({ step: integerParam({ min: 0 }).optional() })

/** The query of `/rubric_status/wait`. */
const WaitQuery = z.object({ timeout_s: secondsParam().default(DEFAULT_WAIT_S) })

/**
 * Step control: `POST /complete` (429 `update_budget_exceeded` with Retry-After past the run's
 * `budgets.updates_per_window`: the step keeps collecting), `GET /rubric_status[?step=N]`, `GET
 * /rubric_status/wait?timeout_s=N`, and `GET /llm_calls` (the run's LLM calls by role, model and outcome, summed over
 * its steps). The wait is clamped to the run's `max_wait_s` (300 s unless configured); on timeout it answers 202.
 */
export const stepRoutes = new Hono<AppEnv>()
  .post('/complete', limitBody('other'), async (c) => {
    const run = c.get('run')
    const reply = await objects.coordinator(c.env, run.id, (coordinator) => coordinator.complete())
    if (reply.refused) throw budgetError(reply.refused)
    return c.json(reply)
  })
  .get('/rubric_status', validQuery(StatusQuery), async (c) => {
    const run = c.get('run')
    const { step } = c.req.valid('query')
    if (step === undefined)
      return c.json(await objects.coordinator(c.env, run.id, (coordinator) => coordinator.status()))
    const status = await objects.coordinator(c.env, run.id, (coordinator) => coordinator.statusOf(step))
    if (!status) {
      throw new AppError(
        'not_found',
        `run "${run.id}" keeps no step ${step}: it has not opened yet, or it is older than the newest ` +
          `${DETAILED_STEPS} updated steps`,
      )
    }
    return c.json(status)
  })
  .get('/llm_calls', async (c) => {
    const run = c.get('run')
    const groups = await objects.coordinator(c.env, run.id, (coordinator) => coordinator.llmCalls())
    return c.json({
      run_id: run.id,
      calls: groups.map(({ latency_ms, ...group }) => ({
        ...group,
        // Labels logged before model ids were redacted may carry a URL's credentials.
        model: redactUrl(group.model),
        mean_latency_ms: group.calls ? Math.round(latency_ms / group.calls) : 0,
      })),
    })
  })
  .get('/rubric_status/wait', validQuery(WaitQuery), async (c) => {
    const run = c.get('run')
    const timeoutS = Math.min(c.req.valid('query').timeout_s, run.config.max_wait_s)
    const deadline = Date.now() + timeoutS * 1_000
    // A reset of the coordinator (a deploy) drops its waiters: the call is made again on a fresh object for what is
    // left of the time.
    const { done, status } = await objects.coordinator(c.env, run.id, (coordinator) =>
      coordinator.waitForUpdate(Math.max(0, deadline - Date.now())),
    )
    if (done) return c.json({ ...status, status: 'updated' as const, mode: run.config.mode, waited_s_max: timeoutS })
    return c.json({ ...status, mode: run.config.mode, waited_s_max: timeoutS, timed_out: true }, 202)
  })
