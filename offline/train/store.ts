/**
 * Which lineage store a train command records in: the flags (`--db`, `--lineage-url`), else the one the env file
 * names (so prepare, finalize and show agree wherever they run from), else `lineage`'s default local file.
 */
import path from 'node:path'
import type { StoreFlags } from '../lineage/backend.ts'
import { DEFAULT_LINEAGE_DB } from '../lineage/local.ts'
import { ENV, type TrainEnv } from './env-file.ts'
import { UsageError } from '../../src/usage-error/index.ts'

/** The store flags of train commands (`--lineage-url`, because `--url` is the edge under training). */
export interface TrainStoreFlags {
  db?: string
  lineageUrl?: string
}

/**
 * The store to open: a local file as an absolute path, or an edge URL.
 * @example resolveStore({}, env) // { db: '/home/me/project/.reward-harness/lineage.sqlite' }
 */
export function resolveStore(flags: TrainStoreFlags, env?: TrainEnv): StoreFlags {
  if (flags.db && flags.lineageUrl) throw new UsageError('give --db or --lineage-url, not both')
  if (flags.lineageUrl) return { url: flags.lineageUrl.replace(/\/+$/, '') }
  if (flags.db) return { db: path.resolve(flags.db) }
  if (env?.[ENV.lineageUrl]) return { url: env[ENV.lineageUrl] }
  if (env?.[ENV.lineageDb]) return { db: env[ENV.lineageDb] }
  return { db: path.resolve(DEFAULT_LINEAGE_DB) }
}

/**
 * How to name the store to a user.
 * @example describeStore({ db: '/tmp/l.sqlite' }) // '/tmp/l.sqlite'
 */
export function describeStore(store: StoreFlags): string {
  return store.url ? `${store.url}/lineage` : store.db!
}
