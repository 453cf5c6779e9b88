/**
 * `npm start`: serve the Worker locally on embedded defaults (mock LLM, local D1 and Durable Objects,
 * the default run open). Writes a random ADMIN_TOKEN to .dev.vars on first start, applies the D1
 * migrations, then runs `wrangler dev --local` on 127.0.0.1:$PORT (8787 unless set). It says one line per thing that
 * matters: wrangler's banner, update check and binding table are silenced (WRANGLER_HIDE_BANNER, WRANGLER_LOG=info
 * keeps its request log and its warnings), and the migrations' tables become one count.
 *
 * `npm start -- --judge local` first starts `npm run judge:local` (a real small model on 127.0.0.1:$JUDGE_PORT and a
 * real embedder beside it, docs/local-judge.md; one already serving there is used as it is), points the runs' agents
 * and the memory's embedder at them, and keeps its state apart from the mock's; the mock stays the default. Other
 * arguments go to wrangler dev.
 */
import { spawn, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('../../', import.meta.url))
const port = process.env.PORT ?? '8787'
/** Where `npm start -- --judge local` keeps its D1, Durable Objects and memory. */
const JUDGE_STATE = '.wrangler/state-judge-local'
/** The environment wrangler runs in here: no telemetry, no fetch of Cloudflare's request metadata. */
export const WRANGLER_ENV = { ...process.env, WRANGLER_SEND_METRICS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false' }
/** What `npm start` adds: no banner or update check, and wrangler's `log` level (binding tables, type hints) off. */
const QUIET_WRANGLER_ENV = { ...WRANGLER_ENV, WRANGLER_HIDE_BANNER: 'true', WRANGLER_LOG: 'info' }

/**
 * Returns the local admin token, creating .dev.vars with a fresh one when it has none.
 * @example const token = ensureAdminToken('/repo/.dev.vars')
 */
export function ensureAdminToken(path: string): { token: string; created: boolean } {
  const current = existsSync(path) ? readFileSync(path, 'utf8') : ''
  const existing = current.match(/^ADMIN_TOKEN=(.+)$/m)?.[1]?.trim()
  if (existing) return { token: existing, created: false }
  const token = `rh_admin_${randomBytes(24).toString('hex')}`
  writeFileSync(path, `${current}${current && !current.endsWith('\n') ? '\n' : ''}ADMIN_TOKEN=${token}\n`, {
    mode: 0o600,
  })
  return { token, created: true }
}

/**
 * The local admin token from .dev.vars (written there first when it has none), said on the console.
 * @example const token = localAdminToken()
 */
export function localAdminToken(): string {
  const { token, created } = ensureAdminToken(`${root}.dev.vars`)
  // The token itself stays in the file: a console is often shared or recorded.
  console.log(
    `${created ? 'A new local admin token was written to' : 'The local admin token is in'} .dev.vars ` +
      `(read it with: sed -n 's/^ADMIN_TOKEN=//p' .dev.vars)`,
  )
  return token
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { judge, rest } = judgeFlag(process.argv.slice(2))
  if (judge !== undefined && judge !== 'local') {
    console.error(`npm start: --judge takes \`local\` (npm run judge:local); without it the default run uses the mock`)
    process.exit(1)
  }
  localAdminToken()
  // The local judge's runs keep their own state: the mock's default run (its rubrics evolved by the mock's replies)
  // is no start for a real judge, and a real judge's versions are no part of the mock's demo.
  const persistTo = judge ? JUDGE_STATE : undefined
  applyLocalMigrations(persistTo)
  if (!(await portIsFree(port))) {
    console.error(
      `npm start: port ${port} on 127.0.0.1 is taken (another npm start?). Stop it, or serve elsewhere: ` +
        `PORT=${Number(port) + 1} npm start`,
    )
    process.exit(1)
  }
  // Loaded only when asked for: the judge's install checks are no part of a plain npm start.
  const local = judge ? await startJudge() : undefined
  const judgeVars = local ? [...localJudgeVars(local), '--persist-to', JUDGE_STATE] : []
  if (local) console.log(`Runs, rubrics and memory in ${JUDGE_STATE} (the mock's state stays in .wrangler/state)`)
  const dev = spawn('npx', wranglerDevArgs(port, [...judgeVars, ...rest]), {
    cwd: root,
    env: QUIET_WRANGLER_ENV,
    stdio: 'inherit',
  })
  for (const signal of ['SIGINT', 'SIGTERM'] as const)
    process.on(signal, () => {
      dev.kill(signal)
      local?.stop(signal)
    })
  dev.on('exit', (code) => {
    local?.stop('SIGTERM')
    process.exit(code ?? 0)
  })
  // Said once it is true: the Worker answers on the port.
  while (
    !(await fetch(`http://127.0.0.1:${port}/healthz`).then(
      (response) => response.ok,
      () => false,
    ))
  )
    await new Promise((resolve) => setTimeout(resolve, 250))
  const llm = local ? `local judge ${local.model}` : 'mock LLM'
  console.log(`Serving on http://127.0.0.1:${port} (${llm}, default run open). Ctrl-C stops.`)
  console.log(`Dashboard at http://127.0.0.1:${port}/ (try \`npm run simulate -- --steps 3\` first)`)
}

/** The local judge (npm run judge:local) on $JUDGE_PORT: the one serving there already, else started here. */
async function startJudge() {
  const { judgeLines, localJudgePorts, startLocalJudge } = await import('../judge-local/index.ts')
  const local = await startLocalJudge(localJudgePorts()).catch((error: Error) => {
    console.error(`npm start: ${error.message}`)
    process.exit(1)
  })
  for (const line of judgeLines(local)) console.log(line)
  if (local.reused) console.log('npm start: using the judge:local already serving there (it keeps running after)')
  return local
}

/**
 * The vars that point the Worker at a local judge: the default run's and new runs' agents (LOCAL_JUDGE_*), and the
 * memory's embedder (an OpenAI-compatible /embeddings of `dimensions`).
 * @example localJudgeVars({ url: 'http://127.0.0.1:8090/v1', model: 'smollm2-135m', embedder: { url: …, model: …,
 *   dimensions: 384 } }) // ['--var', 'LOCAL_JUDGE_URL:http://127.0.0.1:8090/v1', …]
 */
export function localJudgeVars(local: {
  url: string
  model: string
  embedder: { url: string; model: string; dimensions: number }
}): string[] {
  return [
    `LOCAL_JUDGE_URL:${local.url}`,
    `LOCAL_JUDGE_MODEL:${local.model}`,
    'EMBEDDER:openai',
    `EMBEDDINGS_BASE_URL:${local.embedder.url}`,
    `EMBEDDINGS_MODEL:${local.embedder.model}`,
    `EMBEDDINGS_DIMENSIONS:${local.embedder.dimensions}`,
  ].flatMap((pair) => ['--var', pair])
}

/**
 * Takes `--judge <where>` (or `--judge=<where>`) out of npm start's arguments; the rest go to wrangler dev.
 * @example judgeFlag(['--judge', 'local', '--inspector-port', '9230']) // { judge: 'local', rest: ['--inspector-port',
 *   '9230'] }
 */
export function judgeFlag(args: readonly string[]): { judge: string | undefined; rest: string[] } {
  const rest: string[] = []
  let judge: string | undefined
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    if (arg === '--judge') judge = args[++i] ?? ''
    else if (arg.startsWith('--judge=')) judge = arg.slice('--judge='.length)
    else rest.push(arg)
  }
  return { judge, rest }
}

/**
 * The `wrangler dev` command line of `npm start`, with `extra` (what follows `npm start --`) at the end. wrangler's
 * debugger (its inspector) listens on a port the system picks, unless `extra` names one: on its default, 9229, a
 * second wrangler dev (another project, a running `npm test`) or a `node --inspect` would stop this one from starting.
 * @example wranglerDevArgs('8787', ['--inspector-port', '9229']) // […, '--inspector-port', '9229'], no port 0
 */
export function wranglerDevArgs(port: string, extra: readonly string[]): string[] {
  const inspector = extra.some((arg) => arg.split('=')[0] === '--inspector-port') ? [] : ['--inspector-port', '0']
  return [
    'wrangler',
    'dev',
    '--local',
    '--ip',
    '127.0.0.1',
    '--port',
    port,
    '--var',
    'DEPLOYMENT:local',
    '--show-interactive-dev-session=false',
    ...inspector,
    ...extra,
  ]
}

/**
 * Applies the D1 migrations to the local database (`.wrangler/state` unless `persistTo` names another) in one wrangler
 * call, said as one line (`Migrations applied: N`); prints wrangler's output and exits the process when it fails.
 * @example applyLocalMigrations()
 */
export function applyLocalMigrations(persistTo?: string): void {
  const where = persistTo ? ['--persist-to', persistTo] : []
  const migrate = spawnSync('npx', ['wrangler', 'd1', 'migrations', 'apply', 'reward-harness', '--local', ...where], {
    cwd: root,
    env: { ...QUIET_WRANGLER_ENV, WRANGLER_LOG: 'log', NO_COLOR: '1' },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  if (migrate.status !== 0) {
    process.stderr.write(`${migrate.stdout}${migrate.stderr}`)
    console.error(`npm start: the local D1 migrations failed (wrangler exited with ${migrate.status})`)
    process.exit(migrate.status ?? 1)
  }
  console.log(`Migrations applied: ${appliedMigrations(migrate.stdout)} (${migrationCount()} in migrations/)`)
}

/**
 * How many migrations a `wrangler d1 migrations apply` run applied, read from its output.
 * @example appliedMigrations('? About to apply 7 migration(s)\n…') // 7
 */
export function appliedMigrations(output: string): number {
  return Number(output.match(/About to apply (\d+) migration/)?.[1] ?? 0)
}

function migrationCount(): number {
  return readdirSync(join(root, 'migrations')).filter((name) => name.endsWith('.sql')).length
}

/**
 * Whether nothing listens on 127.0.0.1:`port` yet.
 * @example if (!(await portIsFree('8787'))) console.error('taken')
 */
export function portIsFree(port: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer()
    probe.once('error', () => resolve(false))
    probe.listen(Number(port), '127.0.0.1', () => probe.close(() => resolve(true)))
  })
}

/**
 * A TCP port free on 127.0.0.1 right now (the system's pick).
 * @example const port = await freePort()
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer()
    probe.once('error', reject)
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address()
      probe.close(() => resolve(typeof address === 'object' && address ? address.port : 0))
    })
  })
}
