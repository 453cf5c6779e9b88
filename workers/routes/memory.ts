import { Hono } from 'hono'
import { AppError } from '../../src/errors/index.ts'
import { MemoryKind } from '../../src/schemas/memory.ts'
import { checkInstanceId } from './rubrics.ts'
import type { AppEnv } from '../env.ts'
import { memoryFor } from '../memory/backends.ts'
import { checkMemoryQuery } from '../memory/store.ts'
import { integerQuery } from './query.ts'

const MAX_DOCUMENTS = 200

/**
 * `GET /memory?kind=&step=&instance_id=&q=&limit=` — the run's long-term memory; `q` (at most
 * MAX_MEMORY_QUERY_CHARS characters, else 400) makes it a semantic search (best first, with `similarity`), otherwise
 * newest step first.
 */
export const memoryRoutes = new Hono<AppEnv>().get('/memory', async (c) => {
  const run = c.get('run')
  const { kind, step, instance_id: instanceId, q, limit } = c.req.query()
  if (kind !== undefined && !MemoryKind.safeParse(kind).success) {
    throw new AppError('invalid_request', `kind must be one of ${MemoryKind.options.join(', ')} (got "${kind}")`)
  }
  const stepNumber = integerQuery(step, 'step', { fallback: undefined, min: 0 })
  const count = integerQuery(limit, 'limit', { fallback: 50, min: 1, max: MAX_DOCUMENTS })
  checkInstanceId(instanceId)
  if (q !== undefined) checkMemoryQuery(q)
  const memory = memoryFor(c.env, run.id)
  if (q !== undefined && q.trim() !== '') {
    const hits = await memory.search({
      run_id: run.id,
      text: q,
      top_k: count,
      ...(instanceId ? { instance_id: instanceId } : {}),
      ...(kind ? { kinds: [kind as MemoryKind] } : {}),
    })
    const documents = stepNumber === undefined ? hits : hits.filter((doc) => doc.step === stepNumber)
    return c.json({ run_id: run.id, query: q, documents })
  }
  const documents = await memory.list({
    run_id: run.id,
    limit: count,
    ...(instanceId ? { instance_id: instanceId } : {}),
    ...(kind ? { kind: kind as MemoryKind } : {}),
    ...(stepNumber === undefined ? {} : { step: stepNumber }),
  })
  return c.json({ run_id: run.id, documents })
})
