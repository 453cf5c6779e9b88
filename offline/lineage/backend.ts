/**
 * The lineage store a CLI command works on, from its flags: a local SQLite file (`--db`, default
 * .reward-harness/lineage.sqlite) or an edge's `/lineage` API (a URL flag, with REWARD_HARNESS_ADMIN_TOKEN), and how
 * the store's refusals become exit code 2. Heavy modules load only when a command runs, so registering a command that
 * uses this stays cheap.
 */
import { readFile } from 'node:fs/promises'
import { resolve } from 'node:path'
import type { Command } from 'commander'
import { type LineageBackend, RUN_NOT_RECORDED } from '../../src/lineage/compare.ts'
import { UsageError } from '../../src/usage-error/index.ts'

/** Where the store is: `db` a SQLite file, `url` an edge (never both). */
export interface StoreFlags {
  db?: string
  url?: string
}

/**
 * Opens the store the flags name, runs `work` on it and closes it. Refused input (a schema, a conflicting record, an
 * unknown run, an edge 4xx) becomes a UsageError (exit 2); `urlFlag` is how the caller spells the URL flag in
 * messages.
 * @example const chain = await withBackend({ db: 'lineage.sqlite' }, (backend) => backend.chain('grpo-7'))
 */
export async function withBackend<T>(
  flags: StoreFlags,
  work: (backend: LineageBackend) => Promise<T>,
  urlFlag = '--url',
): Promise<T> {
  const { EdgeLineageError } = await import('./http.ts')
  const { ZodError } = await import('zod')
  let close = () => {}
  try {
    let backend: LineageBackend
    if (flags.url) {
      if (flags.db) throw new UsageError(`give --db or ${urlFlag}, not both`)
      const { requireAdminToken } = await import('../edge/index.ts')
      const { edgeLineage } = await import('./http.ts')
      backend = edgeLineage(flags.url, requireAdminToken(flags.url, process.env))
    } else {
      const { openLocalLineage } = await import('./local.ts')
      const opened = openLocalLineage(flags.db)
      close = opened.close
      backend = opened.backend
    }
    return await work(backend)
  } catch (error) {
    if (error instanceof ZodError) {
      throw new UsageError(
        error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`).join('; '),
      )
    }
    if (error instanceof EdgeLineageError && error.status >= 400 && error.status < 500)
      throw new UsageError(error.message)
    if (error instanceof UsageError && error.code === RUN_NOT_RECORDED)
      throw new UsageError(`${error.message} in ${await storeName(flags)}; ${otherStores(urlFlag)}`, {
        code: error.code,
      })
    throw error
  } finally {
    close()
  }
}

/** The store the flags name, in words: the database file's absolute path, or the edge. */
async function storeName(flags: StoreFlags): Promise<string> {
  if (flags.url) return `the lineage of the edge at ${flags.url}`
  const { DEFAULT_LINEAGE_DB } = await import('./local.ts')
  return `the lineage database ${resolve(flags.db ?? DEFAULT_LINEAGE_DB)}`
}

/** How the command chooses another store (`train` commands also take the env file, which names its database). */
function otherStores(urlFlag: string): string {
  return urlFlag === '--lineage-url'
    ? 'choose another with --db <file>, --env-path <env file> (its recorded database) or --lineage-url <edge>'
    : 'choose another with --db <file> or --url <edge>'
}

/**
 * Reads and parses a JSON file; an unreadable file or invalid JSON is a UsageError naming the file.
 * @example const raw = await readJsonFile('runs/grpo-7/manifest.json')
 */
export async function readJsonFile(file: string): Promise<unknown> {
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (error) {
    throw new UsageError(`cannot read ${file}: ${(error as Error).message}`)
  }
  try {
    return JSON.parse(text)
  } catch (error) {
    throw new UsageError(`${file} is not valid JSON: ${(error as Error).message}`)
  }
}

/**
 * Adds the store flags to a command: `--db <file>` and the edge URL flag (`--url`, or another name where `--url`
 * already means something else).
 * @example storeOptions(lineage.command('show').argument('<run_id>'))
 */
export function storeOptions(command: Command, urlFlag: '--url' | '--lineage-url' = '--url'): Command {
  return command
    .option('--db <file>', 'the local lineage SQLite file (default .reward-harness/lineage.sqlite)')
    .option(`${urlFlag} <edge>`, "use the edge's /lineage API instead (admin token: REWARD_HARNESS_ADMIN_TOKEN)")
}
