/**
 * `npm run serve`: the built Worker on Miniflare alone, on 127.0.0.1:$PORT (8787 unless set), with the same local
 * state as `npm start` (`.wrangler/state/v3`: D1 migrated, Durable Objects, R2) and the same `.dev.vars`. For load —
 * a local training run, `npm run bench:rm` — rather than editing: no reload on change, no inspector, and no
 * `wrangler dev` ProxyWorker in front of the Worker. That proxy loses a POST now and then under concurrent load (its
 * pooled connection to the Worker and workerd's 5 s keep-alive close race; it answers 503 "Your worker restarted
 * mid-request" though nothing restarted: workers-sdk#14641) and caps throughput; bench:rm measures both.
 * `--persist-to <dir>` keeps the state elsewhere, as with wrangler; `ADMIN_TOKEN` in the environment replaces the one
 * in `.dev.vars`. `--production` serves as a self-hosted production server: `DEPLOYMENT=production` (the default run
 * behind its token, `/rm` behind the admin or RM token, judge and embedder hosts under the production rules) with
 * `LLM_HOST_ALLOWLIST` and `RM_TOKEN` taken from the environment when set.
 */
import { spawnSync } from 'node:child_process'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { fileURLToPath } from 'node:url'
import { Log, LogLevel, Miniflare, type WorkerOptions } from 'miniflare'
import { unstable_getMiniflareWorkerOptions } from 'wrangler'
import { applyLocalMigrations, localAdminToken, portIsFree, WRANGLER_ENV } from './start.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const port = Number(process.env.PORT ?? '8787')
/** Past the largest route limit (16 MiB) with room: what a trainer sends over a limit is read, then refused. */
const REFUSED_BODY_DRAIN_BYTES = 64 * 1024 * 1024

/**
 * Builds the Worker as `wrangler deploy` would (offline, into `.wrangler/serve`) and returns the script's path.
 * @example const script = buildWorker() // '/repo/.wrangler/serve/index.js'
 */
export function buildWorker(): string {
  const outDir = join(root, '.wrangler/serve')
  const built = spawnSync('npx', ['wrangler', 'deploy', '--dry-run', '--env', '', '--outdir', outDir], {
    cwd: root,
    env: WRANGLER_ENV,
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  if (built.status !== 0) throw new Error(`wrangler deploy --dry-run exited with ${built.status}`)
  return join(outDir, 'index.js')
}

/**
 * The vars `serveWorker` sets over wrangler.toml's: `DEPLOYMENT` (`local`, or `production` for `--production`), the
 * admin token, and in production the host allow-list and RM token from `env` when set.
 * @example serveBindings({ adminToken: 't', production: true }, { LLM_HOST_ALLOWLIST: 'judge.lan' })
 *   // { DEPLOYMENT: 'production', ADMIN_TOKEN: 't', LLM_HOST_ALLOWLIST: 'judge.lan' }
 * @internal
 */
export function serveBindings(
  { adminToken, production = false }: { adminToken: string; production?: boolean },
  env: Record<string, string | undefined> = process.env,
): Record<string, string> {
  const bindings: Record<string, string> = { DEPLOYMENT: production ? 'production' : 'local', ADMIN_TOKEN: adminToken }
  if (!production) return bindings
  for (const name of ['LLM_HOST_ALLOWLIST', 'RM_TOKEN'] as const) {
    const value = env[name]?.trim()
    if (value) bindings[name] = value
  }
  return bindings
}

/**
 * Serves the built Worker with wrangler.toml's bindings, `.dev.vars` and {@link serveBindings}, on the local state.
 * @example const mf = await serveWorker(buildWorker(), 8787, { adminToken }); await mf.dispose()
 */
export async function serveWorker(
  scriptPath: string,
  listenPort: number,
  {
    persistTo,
    adminToken,
    production = false,
    vars = {},
  }: {
    persistTo?: string | undefined
    adminToken: string
    production?: boolean
    /** More vars for the Worker (a bench's embedder settings), over wrangler.toml's. */
    vars?: Record<string, string>
  },
): Promise<Miniflare> {
  const { workerOptions } = unstable_getMiniflareWorkerOptions(join(root, 'wrangler.toml'))
  const mf = new Miniflare({
    log: new Log(LogLevel.WARN),
    host: '127.0.0.1',
    port: listenPort,
    cf: false,
    // wrangler keeps local state in <dir>/v3 (`--persist-to <dir>`, `.wrangler/state` by default).
    defaultPersistRoot: join(persistTo ? resolve(persistTo) : join(root, '.wrangler/state'), 'v3'),
    workers: [
      {
        ...(workerOptions as WorkerOptions),
        // Its wrangler.toml name, which the JUDGE binding to itself names.
        name: 'reward-harness',
        modules: true,
        scriptPath,
        modulesRoot: join(scriptPath, '..'),
        bindings: {
          ...workerOptions.bindings,
          ...vars,
          ...serveBindings({ adminToken, production }),
          // Miniflare alone has no proxy that takes in a body the Worker refused: without this, a client still
          // writing it gets a reset instead of the 413.
          DRAIN_REFUSED_BODY_BYTES: String(REFUSED_BODY_DRAIN_BYTES),
        },
      },
    ],
  })
  await mf.ready
  return mf
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { values } = parseArgs({ options: { 'persist-to': { type: 'string' }, production: { type: 'boolean' } } })
  const persistTo = values['persist-to']
  const production = values.production === true
  // ADMIN_TOKEN in the environment wins and leaves .dev.vars alone (a wrangler dev running beside would reload on it).
  const token = process.env.ADMIN_TOKEN ?? localAdminToken()
  applyLocalMigrations(persistTo)
  if (!(await portIsFree(String(port)))) {
    console.error(`npm run serve: port ${port} on 127.0.0.1 is taken. Serve elsewhere: PORT=${port + 1} npm run serve`)
    process.exit(1)
  }
  const mf = await serveWorker(buildWorker(), port, { persistTo, adminToken: token, production })
  for (const signal of ['SIGINT', 'SIGTERM'] as const)
    process.on(signal, () => void mf.dispose().finally(() => process.exit(0)))
  const mode = production ? 'DEPLOYMENT=production' : 'DEPLOYMENT=local'
  console.log(
    `Serving the built Worker on http://127.0.0.1:${port} (Miniflare alone, local state, ${mode}). Ctrl-C stops.`,
  )
}
