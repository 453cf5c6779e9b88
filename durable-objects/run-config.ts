import { eq } from 'drizzle-orm'
import { drizzle } from 'drizzle-orm/d1'
import { LRUCache } from 'lru-cache'
import defaultRunJson from '../config/default-run.json'
import { redactStored } from '../src/credentials/literal.ts'
import { runs } from '../src/db/schema.ts'
import { RunConfig } from '../src/schemas/run-config.ts'
import { parseStored } from '../src/schemas/strict.ts'

export const DEFAULT_RUN_ID = 'default'

let defaultRun: RunConfig | undefined
/** Run configs never change after creation, so an isolate may keep them. */
const cache = new LRUCache<string, RunConfig>({ max: 1_000 })

/**
 * A run's config: the checked-in default run, or a run created through `POST /runs`.
 * @example const config = await loadRunConfig(env.DB, 'default')
 */
export async function loadRunConfig(db: D1Database, runId: string): Promise<RunConfig | undefined> {
  if (runId === DEFAULT_RUN_ID) return (defaultRun ??= RunConfig.parse(defaultRunJson))
  const cached = cache.get(runId)
  if (cached) return cached
  const row = await drizzle(db).select({ config: runs.config }).from(runs).where(eq(runs.id, runId)).get()
  if (!row) return undefined
  // Stored by any earlier version: a key since removed must not lock the run out.
  const config = parseStored(RunConfig, redactStored('run', runId, row.config))
  cache.set(runId, config)
  return config
}

/**
 * Keeps a run's config that was just stored, so the isolate that created the run reads no row for it.
 * @example rememberRunConfig('grpo-1', config)
 */
export function rememberRunConfig(runId: string, config: RunConfig): void {
  cache.set(runId, config)
}
