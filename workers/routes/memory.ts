import { Hono } from 'hono'
import { z } from 'zod'
import { MemoryKind } from '../../src/schemas/memory.ts'
import { InstanceIdParam } from './rubrics.ts'
import type { AppEnv } from '../env.ts'
import { memoryFor } from '../memory/backends.ts'
import { searchSpend } from '../memory/search-budget.ts'
import { integerParam, validQuery } from '../middleware/query.ts'

const MAX_DOCUMENTS = 200

/**
 * A `kind` query parameter: one of the memory kinds.
 * @example z.object({ kind: MemoryKindParam.optional() })
 */
export const MemoryKindParam = z.enum(MemoryKind.options, { error: `must be one of ${MemoryKind.options.join(', ')}` })

/**
 * The longest memory search text a client may send: a query is a phrase, and embedding a book costs the Worker.
 * @internal
 */
export const MAX_MEMORY_QUERY_CHARS = 2_000

/**
 * A memory search text (`q` of `GET /memory` and of a run's dashboard page): at most {@link MAX_MEMORY_QUERY_CHARS}
 * characters, so a longer one is refused (400 `invalid_request` naming the limit) before anything embeds it.
 * @example z.object({ q: MemorySearchParam.optional() })
 */
export const MemorySearchParam = z.string().max(MAX_MEMORY_QUERY_CHARS, {
  error: (issue) =>
    `is ${String(issue.input).length} characters long; a memory search takes at most ${MAX_MEMORY_QUERY_CHARS}`,
})

/** The query of `GET /memory`. */
const MemoryQuery = z.object({
  kind: MemoryKindParam.optional(),
  step: integerParam({ min: 0 }).optional(),
  instance_id: InstanceIdParam.optional(),
  q: MemorySearchParam.optional(),
  limit: integerParam({ min: 1, max: MAX_DOCUMENTS }).default(50),
})

/**
 * `GET /memory?kind=&step=&instance_id=&q=&limit=` — the run's long-term memory; `q` (at most
 * MAX_MEMORY_QUERY_CHARS characters, else 400) makes it a semantic search (best first, with `similarity`), otherwise
 * newest step first. A search embeds its query, counted against `budgets.memory_searches_per_hour` (429 past it) unless
 * the same text was searched lately.
 */
export const memoryRoutes = new Hono<AppEnv>().get('/memory', validQuery(MemoryQuery), async (c) => {
  const run = c.get('run')
  const { kind, step: stepNumber, instance_id: instanceId, q, limit: count } = c.req.valid('query')
  const memory = memoryFor(c.env, run.id)
  if (q !== undefined && q.trim() !== '') {
    const hits = await memory.search(
      {
        run_id: run.id,
        text: q,
        top_k: count,
        ...(instanceId ? { instance_id: instanceId } : {}),
        ...(kind ? { kinds: [kind] } : {}),
      },
      searchSpend(c.env.DB, c.get('principal'), run),
    )
    const documents = stepNumber === undefined ? hits : hits.filter((doc) => doc.step === stepNumber)
    return c.json({ run_id: run.id, query: q, documents })
  }
  const documents = await memory.list({
    run_id: run.id,
    limit: count,
    ...(instanceId ? { instance_id: instanceId } : {}),
    ...(kind ? { kind } : {}),
    ...(stepNumber === undefined ? {} : { step: stepNumber }),
  })
  return c.json({ run_id: run.id, documents })
})
