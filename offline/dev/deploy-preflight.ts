/**
 * `npm run deploy` runs this first: it stops a deploy that would fail half-way on a fresh Cloudflare account, saying
 * what to do. Today that is the production D1 `database_id`, which wrangler.toml ships as a placeholder (TOML configs
 * are not patched by `wrangler d1 create`): `npm run deploy:database-id -- <id>` writes the id `d1 create` printed.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

/** The database_id wrangler.toml ships with; a deploy with it cannot reach any real database. */
export const PLACEHOLDER_DATABASE_ID = '00000000-0000-0000-0000-000000000000'
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
const PRODUCTION_D1 = /(\[\[env\.production\.d1_databases\]\][^[]*?database_id\s*=\s*")([^"]*)(")/

/**
 * The production D1 database_id of a wrangler.toml text (undefined when the block is missing).
 * @example productionDatabaseId(readFileSync('wrangler.toml', 'utf8')) // '00000000-0000-0000-0000-000000000000'
 */
export function productionDatabaseId(toml: string): string | undefined {
  return PRODUCTION_D1.exec(toml)?.[2]
}

/**
 * The wrangler.toml text with the production D1 database_id set to `id`.
 * @example withProductionDatabaseId(toml, 'c0ffee00-1111-2222-3333-444455556666')
 */
export function withProductionDatabaseId(toml: string, id: string): string {
  if (!UUID.test(id))
    throw new Error(`"${id}" is not a D1 database id (a UUID, as \`npx wrangler d1 create reward-harness\` prints it)`)
  if (!PRODUCTION_D1.test(toml))
    throw new Error('wrangler.toml has no [[env.production.d1_databases]] block with a database_id')
  return toml.replace(PRODUCTION_D1, `$1${id}$3`)
}

/**
 * What stops a production deploy, one line each (empty when nothing does).
 * @example deployProblems(readFileSync('wrangler.toml', 'utf8')) // ['the production D1 database_id is the placeholder:
 *   …']
 */
export function deployProblems(toml: string): string[] {
  const id = productionDatabaseId(toml)
  if (id === undefined) return ['wrangler.toml has no [[env.production.d1_databases]] block with a database_id']
  if (id === PLACEHOLDER_DATABASE_ID || !UUID.test(id)) {
    return [
      `the production D1 database_id is ` +
        `${id === PLACEHOLDER_DATABASE_ID ? 'the placeholder' : `"${id}", not a UUID`}: run \`npx wrangler d1 create ` +
        `reward-harness\`, then \`npm run deploy:database-id -- <the database_id it printed>\` (docs/deploy.md, step ` +
        `2)`,
    ]
  }
  return []
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const file = fileURLToPath(new URL('../../wrangler.toml', import.meta.url))
  const toml = readFileSync(file, 'utf8')
  const [flag, id] = process.argv.slice(2)
  if (flag === '--set-database-id') {
    try {
      writeFileSync(file, withProductionDatabaseId(toml, id ?? ''))
    } catch (error) {
      console.error(`deploy: ${(error as Error).message}`)
      process.exit(2)
    }
    console.log(`wrangler.toml: [env.production] D1 database_id = "${id}"`)
  } else {
    const problems = deployProblems(toml)
    for (const problem of problems) console.error(`deploy: ${problem}`)
    if (problems.length > 0) process.exit(2)
  }
}
