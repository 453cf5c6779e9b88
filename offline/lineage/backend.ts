/**
 * The lineage store a CLI command works on, from its flags: a local SQLite file (`--db`, default
 * .reward-harness/lineage.sqlite) or an edge's `/lineage` API (a URL flag, with REWARD_HARNESS_ADMIN_TOKEN), and how
 * the store's refusals become exit code 2. Heavy modules load only when a command runs, so registering a command that
 * uses this stays cheap.
 */
import type { Command } from 'commander'
import type { LineageBackend } from '../../src/lineage/compare.ts'
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
      const token = process.env.REWARD_HARNESS_ADMIN_TOKEN
      if (!token) throw new UsageError(`${urlFlag} needs the admin token in REWARD_HARNESS_ADMIN_TOKEN`)
      const { edgeLineage } = await import('./http.ts')
      backend = edgeLineage(flags.url, token)
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
    throw error
  } finally {
    close()
  }
}

/**
 * Reads and parses a JSON file; an unreadable file or invalid JSON is a UsageError naming the file.
 * @example const raw = await readJsonFile('runs/grpo-7/manifest.json')
 */
export async function readJsonFile(file: string): Promise<unknown> {
  const { readFile } = await import('node:fs/promises')
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
    .option(`${urlFlag} <edge>`, "use the edge's /lineage API instead (admin token from REWARD_HARNESS_ADMIN_TOKEN)")
}
