import { Hono } from 'hono'
import { z } from 'zod'
import { ScoreRequest } from '../../src/schemas/rollout.ts'
import type { ScoreResult } from '../../src/schemas/score.ts'
import type { AppEnv } from '../env.ts'
import { limitBody } from '../middleware/body-limit.ts'
import { jsonBody } from '../middleware/json-body.ts'
import { requestModels } from '../scoring/models.ts'
import { MAX_ROLLOUTS_PER_BATCH } from '../scoring/fan-out.ts'
import { scoreRollout, scoreRollouts, type ItemOutcome } from '../scoring/score-rollout.ts'
import { recordTelemetry } from '../telemetry/index.ts'

/**
 * The body of `POST /score/batch`: `/score` bodies, scored together.
 * @example ScoreBatchRequest.parse({ items: [{ rollout: { id: 'r1', input: 'Q', output: 'A' }, metadata }] })
 * @internal
 */
export const ScoreBatchRequest = z.object({
  items: z
    .array(ScoreRequest)
    .max(MAX_ROLLOUTS_PER_BATCH, `at most ${MAX_ROLLOUTS_PER_BATCH} items per request: send the rest in another`),
})

/**
 * `POST /score` — grade one rollout against its instance's current rubrics.
 * `POST /score/batch` `{items: [<a /score body>…]}` (at most 8,192) — `{results: [<a /score answer> | {error: {code,
 * message}}…], request_id}` in the order sent; one item's failure does not fail the others. One ledger call per shard
 * looks the batch up (what was already recorded costs no model call) and one records it.
 */
export const scoreRoute = new Hono<AppEnv>()
  .post('/score', limitBody('rollout'), jsonBody(ScoreRequest), async (c) => {
    const run = c.get('run')
    const requestId = c.get('requestId')
    const models = requestModels(c.env, run.config)
    let score: ScoreResult | undefined
    try {
      score = await scoreRollout(
        { env: c.env, run, scorer: models.forRole('scorer'), calls: models.calls, requestId },
        c.get('body'),
      )
      return c.json(score)
    } finally {
      recordTelemetry(
        c.env,
        { runId: run.id, requestId, calls: models.calls, ...(score ? { scores: [score] } : {}) },
        c.executionCtx,
      )
    }
  })
  .post('/score/batch', limitBody('batch'), jsonBody(ScoreBatchRequest), async (c) => {
    const run = c.get('run')
    const requestId = c.get('requestId')
    if (c.get('body').items.length === 0) return c.json({ results: [], request_id: requestId })
    const models = requestModels(c.env, run.config)
    let scores: ScoreResult[] = []
    let outcomes: ItemOutcome[]
    try {
      outcomes = await scoreRollouts(
        { env: c.env, run, scorer: models.forRole('scorer'), calls: models.calls, requestId },
        c.get('body').items,
        { lookupFirst: true },
      )
      scores = outcomes.flatMap((outcome) => (outcome.ok ? [outcome.result] : []))
    } finally {
      // Calls made before a failure were made all the same.
      recordTelemetry(c.env, { runId: run.id, requestId, calls: models.calls, scores }, c.executionCtx)
    }
    return c.json({
      results: outcomes.map((outcome) =>
        outcome.ok ? outcome.result : { error: { code: outcome.error.code, message: outcome.error.message } },
      ),
      request_id: requestId,
    })
  })
