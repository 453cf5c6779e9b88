/**
 * The offline lineage store: a local SQLite file (better-sqlite3) with the same drizzle tables as the edge's D1,
 * created by applying the repository's migrations.
 */
import { mkdirSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import Database from 'better-sqlite3'
import { drizzle } from 'drizzle-orm/better-sqlite3'
import { migrate } from 'drizzle-orm/better-sqlite3/migrator'
import type { LineageBackend } from '../../src/lineage/compare.ts'
import {
  listRuns,
  loadChain,
  type LineageDb,
  recordEval,
  recordManifest,
  recordResult,
} from '../../src/lineage/store.ts'

export const DEFAULT_LINEAGE_DB = '.reward-harness/lineage.sqlite'
const MIGRATIONS = fileURLToPath(new URL('../../migrations', import.meta.url))

/**
 * Opens (creating and migrating if needed) a lineage SQLite file. Writers wait up to 5 s for each other's locks.
 * @example const { backend, close } = openLocalLineage('.reward-harness/lineage.sqlite')
 */
export function openLocalLineage(file: string = DEFAULT_LINEAGE_DB): {
  backend: LineageBackend
  db: LineageDb
  close(): void
} {
  if (file !== ':memory:') mkdirSync(path.dirname(path.resolve(file)), { recursive: true })
  const sqlite = new Database(file)
  sqlite.pragma('journal_mode = WAL')
  sqlite.pragma('busy_timeout = 5000')
  const db = drizzle(sqlite)
  migrate(db, { migrationsFolder: MIGRATIONS })
  return { backend: dbBackend(db), db, close: () => sqlite.close() }
}

/**
 * A LineageBackend over any drizzle SQLite database (better-sqlite3 or D1).
 * @example const backend = dbBackend(drizzle(env.DB))
 */
function dbBackend(db: LineageDb): LineageBackend {
  return {
    recordManifest: (manifest) => recordManifest(db, manifest),
    recordResult: (result) => recordResult(db, result),
    recordEval: (report) => recordEval(db, report),
    chain: (runId) => loadChain(db, runId),
    listRuns: (filter) => listRuns(db, filter),
  }
}
