/**
 * The physical-limit reference for `npm run bench`: a bare Hono worker that reads and parses the same
 * JSON body as `POST /score` and answers a constant JSON of the same shape, with no validation,
 * Durable Object, D1 or LLM work. Built by bench/score-throughput.ts with bench/bare-worker.wrangler.toml.
 */
import { Hono } from 'hono'

const CONSTANT_RESULT = {
  score: 0.7,
  rubric_version: 1,
  instance_id: 'global',
  criteria: [
    { rubric_id: 'anchor-correctness', grade: 7, weight: 2, reason: 'stub' },
    { rubric_id: 'anchor-instructions', grade: 7, weight: 1, reason: 'stub' },
    { rubric_id: 'adaptive-reasoning', grade: 7, weight: 1, reason: 'stub' },
    { rubric_id: 'adaptive-concise', grade: 7, weight: 0.5, reason: 'stub' },
  ],
  request_id: 'bare',
  run_id: 'bare',
  rollout_id: 'bare',
  step: 0,
  grade_max: 10,
  duplicate: false,
  cached: false,
}

/**
 * Builds the bare app: `POST /score` and `POST /runs/:runId/score` parse the body and answer a constant.
 * @example export default { fetch: createBareApp().fetch }
 */
export function createBareApp() {
  const handler = async (c: import('hono').Context) => {
    const body = (await c.req.json()) as { rollout?: { id?: unknown } }
    return c.json({ ...CONSTANT_RESULT, rollout_id: typeof body.rollout?.id === 'string' ? body.rollout.id : 'bare' })
  }
  return new Hono().post('/score', handler).post('/runs/:runId/score', handler)
}

export default { fetch: createBareApp().fetch } satisfies ExportedHandler
