/**
 * `npm run serve`: the built Worker on Miniflare alone, on 127.0.0.1:$PORT (8787 unless set), with the same local
 * state as `npm start` (`.wrangler/state/v3`: D1 migrated, Durable Objects, R2) and the same `.dev.vars`. For load —
 * a local training run, `npm run bench:rm` — rather than editing: no reload on change, no inspector, and no
 * `wrangler dev` ProxyWorker in front of the Worker. That proxy loses a POST now and then under concurrent load (its
 * pooled connection to the Worker and workerd's 5 s keep-alive close race; it answers 503 "Your worker restarted
 * mid-request" though nothing restarted: workers-sdk#14641) and caps throughput; bench:rm measures both.
 * `--persist-to <dir>` keeps the state elsewhere, as with wrangler; `ADMIN_TOKEN` in the environment replaces the one
 * in `.dev.vars`.
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
 * Serves the built Worker with wrangler.toml's bindings, `.dev.vars` and `DEPLOYMENT=local`, on the local state.
 * @example const mf = await serveWorker(buildWorker(), 8787, { adminToken }); await mf.dispose()
 */
export async function serveWorker(
  scriptPath: string,
  listenPort: number,
  { persistTo, adminToken }: { persistTo?: string | undefined; adminToken: string },
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
        bindings: { ...workerOptions.bindings, DEPLOYMENT: 'local', ADMIN_TOKEN: adminToken },
      },
    ],
  })
  await mf.ready
  return mf
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const persistTo = parseArgs({ options: { 'persist-to': { type: 'string' } } }).values['persist-to']
  // ADMIN_TOKEN in the environment wins and leaves .dev.vars alone (a wrangler dev running beside would reload on it).
  const token = process.env.ADMIN_TOKEN ?? localAdminToken()
  applyLocalMigrations(persistTo)
  if (!(await portIsFree(String(port)))) {
    console.error(`npm run serve: port ${port} on 127.0.0.1 is taken. Serve elsewhere: PORT=${port + 1} npm run serve`)
    process.exit(1)
  }
  const mf = await serveWorker(buildWorker(), port, { persistTo, adminToken: token })
  for (const signal of ['SIGINT', 'SIGTERM'] as const)
    process.on(signal, () => void mf.dispose().finally(() => process.exit(0)))
  console.log(`Serving the built Worker on http://127.0.0.1:${port} (Miniflare alone, local state). Ctrl-C stops.`)
}
