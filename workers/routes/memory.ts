import { Hono } from 'hono'
import { AppError } from '../../src/errors/index.ts'
import { MemoryKind } from '../../src/schemas/memory.ts'
import { checkInstanceId } from './rubrics.ts'
import type { AppEnv } from '../env.ts'
import { memoryFor } from '../memory/backends.ts'

const MAX_DOCUMENTS = 200

/**
 * `GET /memory?kind=&step=&instance_id=&q=&limit=` — the run's long-term memory; `q` makes it a
 * semantic search (best first, with `similarity`), otherwise newest step first.
 */
export const memoryRoutes = new Hono<AppEnv>().get('/memory', async (c) => {
  const run = c.get('run')
  const { kind, step, instance_id: instanceId, q, limit } = c.req.query()
  if (kind !== undefined && !MemoryKind.safeParse(kind).success) {
    throw new AppError('invalid_request', `kind must be one of ${MemoryKind.options.join(', ')} (got "${kind}")`)
  }
  // Digits only: Number() would read '', ' ' and '0x1' as numbers.
  const stepNumber = step === undefined ? undefined : /^\d{1,9}$/.test(step) ? Number(step) : NaN
  if (stepNumber !== undefined && !(Number.isInteger(stepNumber) && stepNumber >= 0)) throw new AppError('invalid_request', `step must be an integer ≥ 0 (got "${step}")`)
  const count = limit === undefined ? 50 : /^\d{1,9}$/.test(limit) ? Number(limit) : NaN
  if (!(Number.isInteger(count) && count >= 1 && count <= MAX_DOCUMENTS)) throw new AppError('invalid_request', `limit must be an integer from 1 to ${MAX_DOCUMENTS}`)
  checkInstanceId(instanceId)
  const memory = memoryFor(c.env, run.id)
  if (q !== undefined && q.trim() !== '') {
    const hits = await memory.search({
      run_id: run.id, text: q.slice(0, 2_000), top_k: count,
      ...(instanceId ? { instance_id: instanceId } : {}), ...(kind ? { kinds: [kind as MemoryKind] } : {}),
    })
    const documents = stepNumber === undefined ? hits : hits.filter((doc) => doc.step === stepNumber)
    return c.json({ run_id: run.id, query: q, documents })
  }
  const documents = await memory.list({
    run_id: run.id, limit: count,
    ...(instanceId ? { instance_id: instanceId } : {}), ...(kind ? { kind: kind as MemoryKind } : {}), ...(stepNumber === undefined ? {} : { step: stepNumber }),
  })
  return c.json({ run_id: run.id, documents })
})
