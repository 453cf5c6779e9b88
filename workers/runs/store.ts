import { eq } from 'drizzle-orm'
import { drizzle } from 'drizzle-orm/d1'
import defaultRunJson from '../../config/default-run.json'
import { runs, runTokens } from '../../src/db/schema.ts'
import { sha256Hex, toHex } from '../../src/hash/index.ts'
import { RunConfig } from '../../src/schemas/run-config.ts'

export const DEFAULT_RUN_ID = 'default'

let defaultRun: RunConfig | undefined
/** Run configs never change after creation, so an isolate may keep them. */
const cache = new Map<string, RunConfig>()

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
  const config = RunConfig.parse(row.config)
  cache.set(runId, config)
  return config
}

/**
 * Stores a new run and a fresh bearer token scoped to it; returns the token (shown once, stored hashed).
 * @example const { token } = await createRun(env.DB, 'grpo-1', config)
 */
export async function createRun(db: D1Database, runId: string, config: RunConfig): Promise<{ token: string } | { exists: true }> {
  const token = `rh_${randomHex(24)}`
  const now = new Date().toISOString()
  const orm = drizzle(db)
  try {
    await orm.batch([
      orm.insert(runs).values({ id: runId, config, createdAt: now }),
      orm.insert(runTokens).values({ tokenHash: await sha256Hex(token), runId, createdAt: now }),
    ])
  } catch (error) {
    if (/UNIQUE|PRIMARY KEY/i.test(String((error as Error).message) + String((error as Error).cause ?? ''))) return { exists: true }
    throw error
  }
  cache.set(runId, config)
  return { token }
}

/**
 * The run a bearer token is scoped to, by the token's SHA-256 in hex, or undefined for an unknown token.
 * @example const runId = await runForTokenHash(env.DB, await sha256Hex('rh_…'))
 */
export async function runForTokenHash(db: D1Database, tokenHash: string): Promise<string | undefined> {
  const row = await drizzle(db).select({ runId: runTokens.runId }).from(runTokens).where(eq(runTokens.tokenHash, tokenHash)).get()
  return row?.runId
}

/**
 * Random hex from Web Crypto.
 * @example randomHex(16) // 32 hex digits
 */
export function randomHex(bytes: number): string {
  return toHex(crypto.getRandomValues(new Uint8Array(bytes)))
}
