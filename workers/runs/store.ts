import { and, eq, isNull } from 'drizzle-orm'
import { drizzle } from 'drizzle-orm/d1'
import { runs, runTokens, tokenAudit } from '../../src/db/schema.ts'
import { sha256Hex, toHex } from '../../src/hash/index.ts'
import type { RunConfig } from '../../src/schemas/run-config.ts'
import { rememberRunConfig } from '../../durable-objects/run-config.ts'

/**
 * Stores a new run and a fresh bearer token scoped to it; returns the token (shown once, stored hashed).
 * @example const { token } = await createRun(env.DB, 'grpo-1', config)
 */
export async function createRun(
  db: D1Database,
  runId: string,
  config: RunConfig,
): Promise<{ token: string } | { exists: true }> {
  const now = new Date().toISOString()
  const orm = drizzle(db)
  const issued = await newToken(runId, now, 'admin')
  try {
    await orm.batch([orm.insert(runs).values({ id: runId, config, createdAt: now }), ...issued.rows(orm)])
  } catch (error) {
    if (/UNIQUE|PRIMARY KEY/i.test(String((error as Error).message) + String((error as Error).cause ?? '')))
      return { exists: true }
    throw error
  }
  rememberRunConfig(runId, config)
  return { token: issued.token }
}

/** A run token as the admin API lists it: never the token, only its id and its first characters. */
export interface RunTokenInfo {
  /** The first 12 hex digits of the token's SHA-256. */
  id: string
  /** `rh_` and the token's first 8 hex digits (null for tokens from before prefixes were kept). */
  prefix: string | null
  created_at: string
  revoked_at: string | null
}

/**
 * Issues another token for an existing run (a rotation: revoke the old one once the trainer has the new one).
 * @example const { token, id } = await issueToken(env.DB, 'grpo-1', 'admin')
 */
export async function issueToken(
  db: D1Database,
  runId: string,
  actor: string,
): Promise<{ token: string } & RunTokenInfo> {
  const orm = drizzle(db)
  const issued = await newToken(runId, new Date().toISOString(), actor)
  const [token, audit] = issued.rows(orm)
  await orm.batch([token, audit])
  return { token: issued.token, ...issued.info }
}

/**
 * Revokes a run's token named by its prefix (`rh_` and 8 hex digits) or its id (its hash's first 12 hex digits),
 * with an audit row; a token already revoked keeps its first revocation time.
 * @example await revokeToken(env.DB, 'grpo-1', 'rh_1a2b3c4d', 'admin') // { revoked: { id: '…', revoked_at: '…' } }
 */
export async function revokeToken(
  db: D1Database,
  runId: string,
  reference: string,
  actor: string,
): Promise<{ revoked: RunTokenInfo & { token_hash: string } } | { missing: true } | { ambiguous: number }> {
  const orm = drizzle(db)
  const matches = (await listTokenRows(db, runId)).filter(
    (row) => row.prefix === reference || row.tokenHash.startsWith(reference.toLowerCase()),
  )
  if (matches.length === 0) return { missing: true }
  if (matches.length > 1) return { ambiguous: matches.length }
  const row = matches[0]!
  if (row.revokedAt) return { revoked: { ...infoOf(row), token_hash: row.tokenHash } }
  const now = new Date().toISOString()
  await orm.batch([
    orm
      .update(runTokens)
      .set({ revokedAt: now })
      .where(and(eq(runTokens.tokenHash, row.tokenHash), isNull(runTokens.revokedAt))),
    orm.insert(tokenAudit).values({ runId, tokenId: row.tokenHash.slice(0, 12), action: 'revoked', actor, at: now }),
  ])
  return { revoked: { ...infoOf({ ...row, revokedAt: now }), token_hash: row.tokenHash } }
}

/**
 * A run's tokens, oldest first.
 * @example const tokens = await listTokens(env.DB, 'grpo-1')
 */
export async function listTokens(db: D1Database, runId: string): Promise<RunTokenInfo[]> {
  return (await listTokenRows(db, runId)).map(infoOf)
}

/**
 * The run a bearer token is scoped to, by the token's SHA-256 in hex, or undefined for an unknown or revoked token.
 * @example const runId = await runForTokenHash(env.DB, await sha256Hex('rh_…'))
 */
export async function runForTokenHash(db: D1Database, tokenHash: string): Promise<string | undefined> {
  const row = await drizzle(db)
    .select({ runId: runTokens.runId })
    .from(runTokens)
    .where(and(eq(runTokens.tokenHash, tokenHash), isNull(runTokens.revokedAt)))
    .get()
  return row?.runId
}

async function newToken(runId: string, now: string, actor: string) {
  const token = `rh_${randomHex(24)}`
  const tokenHash = await sha256Hex(token)
  const prefix = token.slice(0, 11)
  return {
    token,
    info: { id: tokenHash.slice(0, 12), prefix, created_at: now, revoked_at: null } satisfies RunTokenInfo,
    rows: (orm: ReturnType<typeof drizzle>) =>
      [
        orm.insert(runTokens).values({ tokenHash, runId, createdAt: now, prefix }),
        orm.insert(tokenAudit).values({ runId, tokenId: tokenHash.slice(0, 12), action: 'created', actor, at: now }),
      ] as const,
  }
}

async function listTokenRows(db: D1Database, runId: string) {
  return drizzle(db).select().from(runTokens).where(eq(runTokens.runId, runId)).orderBy(runTokens.createdAt).all()
}

function infoOf(row: {
  tokenHash: string
  prefix: string | null
  createdAt: string
  revokedAt: string | null
}): RunTokenInfo {
  return { id: row.tokenHash.slice(0, 12), prefix: row.prefix, created_at: row.createdAt, revoked_at: row.revokedAt }
}

/**
 * Random hex from Web Crypto.
 * @example randomHex(16) // 32 hex digits
 */
export function randomHex(bytes: number): string {
  return toHex(crypto.getRandomValues(new Uint8Array(bytes)))
}
