import { and, eq, lt, sql } from 'drizzle-orm'
import { drizzle } from 'drizzle-orm/d1'
import { budgetError, memorySearchBudgetRefusal } from '../../src/budgets/index.ts'
import { budgetSpend } from '../../src/db/schema.ts'
import type { RunConfig } from '../../src/schemas/run-config.ts'
import type { Principal } from '../env.ts'

/** The budget's window: a clock hour. */
const HOUR_MS = 3_600_000
/** The budget's name in `budget_spend`. */
const MEMORY_SEARCHES = 'memory_searches'

/**
 * Counts one memory search (one embedding of a query) against its run's `budgets.memory_searches_per_hour` in the
 * current clock hour, and throws the 429 `memory_search_budget_exceeded` (Retry-After: the hour's end) once the
 * count passes it. One D1 batch raises the count in place and reads it back, so concurrent searches on every isolate
 * count once each; the run's rows of past hours go in the same batch.
 * @example await spendMemorySearch(c.env.DB, c.get('run'))
 */
async function spendMemorySearch(
  db: D1Database,
  run: { id: string; config: RunConfig },
  now = Date.now(),
): Promise<void> {
  const hour = Math.floor(now / HOUR_MS)
  const orm = drizzle(db)
  const ofRun = and(eq(budgetSpend.runId, run.id), eq(budgetSpend.budget, MEMORY_SEARCHES))
  const [, counted] = await orm.batch([
    orm.delete(budgetSpend).where(and(ofRun, lt(budgetSpend.windowIndex, hour))),
    orm
      .insert(budgetSpend)
      .values({ runId: run.id, budget: MEMORY_SEARCHES, windowIndex: hour, spent: 1 })
      .onConflictDoUpdate({
        target: [budgetSpend.runId, budgetSpend.budget, budgetSpend.windowIndex],
        set: { spent: sql`${budgetSpend.spent} + 1` },
      })
      .returning({ spent: budgetSpend.spent }),
  ])
  const spent = counted[0]?.spent ?? 1
  if (spent <= run.config.budgets.memory_searches_per_hour) return
  const retryAfterSeconds = Math.max(1, Math.ceil(((hour + 1) * HOUR_MS - now) / 1_000))
  throw budgetError(memorySearchBudgetRefusal(run.config.budgets, retryAfterSeconds))
}

/**
 * What a memory search by `principal` spends: the run's budget for its tokens (and anyone else), nothing for the
 * admin, who writes the budgets and is bounded by its own rate limit.
 * @example await memory.search(query, searchSpend(c.env.DB, c.get('principal'), c.get('run')))
 */
export function searchSpend(
  db: D1Database,
  principal: Principal,
  run: { id: string; config: RunConfig },
): () => Promise<void> {
  return principal.kind === 'admin' ? async () => {} : () => spendMemorySearch(db, run)
}
