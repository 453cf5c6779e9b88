import { Hono } from 'hono'
import { ScoreRequest } from '../../src/schemas/rollout.ts'
import type { ScoreResult } from '../../src/schemas/score.ts'
import type { AppEnv } from '../env.ts'
import { jsonBody } from '../middleware/json-body.ts'
import { requestModels } from '../scoring/models.ts'
import { scoreRecords } from '../scoring/persist.ts'
import { scoreRollout } from '../scoring/score-rollout.ts'

/** `POST /score` — grade one rollout against its instance's current rubrics. */
export const scoreRoute = new Hono<AppEnv>().post('/score', jsonBody(ScoreRequest), async (c) => {
  const run = c.get('run')
  const requestId = c.get('requestId')
  const models = requestModels(c.env, run.config)
  let score: ScoreResult | undefined
  try {
    score = await scoreRollout({ env: c.env, run, scorer: models.forRole('scorer'), requestId, defer: (work) => c.executionCtx.waitUntil(work) }, c.get('body'))
    return c.json(score)
  } finally {
    scoreRecords.add(c.env.DB, { runId: run.id, requestId, calls: models.calls, ...(score ? { scores: [score] } : {}) }, (work) => c.executionCtx.waitUntil(work))
  }
})
