import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { rmSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { freePort } from '../../../offline/dev/start.ts'

/** The repository root: wrangler reads wrangler.toml and migrations/ from here. */
const ROOT = path.join(import.meta.dirname, '../../..')

/** Keeps wrangler quiet and offline: no metrics, no request.cf lookup. */
const WRANGLER_ENV = {
  ...process.env,
  WRANGLER_SEND_METRICS: 'false',
  CLOUDFLARE_CF_FETCH_ENABLED: 'false',
  NO_COLOR: '1',
  FORCE_COLOR: '0',
}

/** How long a cold `wrangler dev` may take to answer /healthz on a busy 2-core machine. */
const READY_TIMEOUT_MS = 60_000
/** How long `wrangler d1 migrations apply` may take. */
const MIGRATE_TIMEOUT_MS = 60_000
/** Interval between two /healthz probes while waiting for the server. */
const PROBE_INTERVAL_MS = 100
/** Output lines kept for error messages. */
const LOG_LINES = 200

/**
 * A running `wrangler dev`: where it listens, its admin token, and how to stop it.
 * @example const { baseUrl, adminToken, stop } = await startWranglerDev()
 */
export interface WranglerDev {
  /** e.g. `http://127.0.0.1:40123` */
  baseUrl: string
  /** The ADMIN_TOKEN this server was started with (random per start). */
  adminToken: string
  /** The last lines wrangler printed, for diagnosing a failure. */
  logs(): string
  /** Everything wrangler and the Worker printed since the start (what an operator's log would hold). */
  fullLog(): string
  /** Kills the whole process group and removes the state directory; safe to call twice. */
  stop(): Promise<void>
}

/**
 * Options of `startWranglerDev`.
 * @example await startWranglerDev({ vars: { OPENAI_API_KEY: 'sk-test' } })
 */
export interface WranglerDevOptions {
  /** Extra `--var NAME:value` pairs (ADMIN_TOKEN is always set). */
  vars?: Record<string, string>
  /**
   * `DEPLOYMENT`: `local` (the default: the default run and `/rm/*` open) or `production` (every route needs a token).
   */
  deployment?: 'local' | 'production'
}

/**
 * Starts a real `wrangler dev --local` on 127.0.0.1 with fresh state (own port, own --persist-to dir, D1 migrated).
 * @example const dev = await startWranglerDev(); await fetch(`${dev.baseUrl}/healthz`); await dev.stop()
 */
export async function startWranglerDev(options: WranglerDevOptions = {}): Promise<WranglerDev> {
  const stateDir = await mkdtemp(path.join(tmpdir(), 'rh-e2e-'))
  try {
    await runToCompletion(
      'npx',
      ['wrangler', 'd1', 'migrations', 'apply', 'reward-harness', '--local', '--persist-to', stateDir],
      MIGRATE_TIMEOUT_MS,
    )
    // A port picked free can be taken before wrangler binds it; another port then fixes it.
    let lastError: unknown
    for (let attempt = 1; attempt <= 3; attempt++) {
      try {
        return await launch(stateDir, await freePort(), options)
      } catch (error) {
        lastError = error
        if (!(error instanceof EarlyExitError)) break
      }
    }
    throw lastError
  } catch (error) {
    await rm(stateDir, { recursive: true, force: true })
    throw error
  }
}

class EarlyExitError extends Error {}

/** Servers still running, killed (with their state removed) if the test process exits without calling stop(). */
const live = new Map<number, string>()
process.once('exit', () => {
  for (const [pid, stateDir] of live) {
    try {
      process.kill(-pid, 'SIGKILL')
    } catch {
      // Already gone.
    }
    rmSync(stateDir, { recursive: true, force: true })
  }
})

async function launch(stateDir: string, port: number, options: WranglerDevOptions): Promise<WranglerDev> {
  const adminToken = `rh_e2e_admin_${randomBytes(16).toString('hex')}`
  const vars = { DEPLOYMENT: options.deployment ?? 'local', ...options.vars, ADMIN_TOKEN: adminToken }
  const args = ['wrangler', 'dev', '--local', '--ip', '127.0.0.1', '--port', String(port), '--persist-to', stateDir]
  for (const [name, value] of Object.entries(vars)) args.push('--var', `${name}:${value}`)
  // The debugger on a port the system picks: 9229 may be another wrangler dev's (npm start, a second test run).
  args.push('--show-interactive-dev-session=false', '--inspector-port', '0')

  const child = spawn('npx', args, { cwd: ROOT, env: WRANGLER_ENV, detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
  const log = collectOutput(child)
  const everything: string[] = []
  child.stdout?.on('data', (chunk: Buffer) => everything.push(chunk.toString('utf8')))
  child.stderr?.on('data', (chunk: Buffer) => everything.push(chunk.toString('utf8')))
  const fullLog = () => everything.join('')
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  live.set(child.pid!, stateDir)
  let stopped = false
  const stop = async () => {
    if (stopped) return
    stopped = true
    await killGroup(child, exited)
    await rm(stateDir, { recursive: true, force: true })
  }

  const baseUrl = `http://127.0.0.1:${port}`
  const deadline = Date.now() + READY_TIMEOUT_MS
  let exitCode: number | null | undefined
  void exited.then((code) => (exitCode = code))
  while (Date.now() < deadline) {
    if (exitCode !== undefined) {
      await killGroup(child, exited)
      throw new EarlyExitError(`wrangler dev exited with code ${exitCode} before answering /healthz:\n${log()}`)
    }
    const healthy = await fetch(`${baseUrl}/healthz`, { signal: AbortSignal.timeout(5_000) }).then(
      async (response) => {
        await response.body?.cancel()
        return response.status === 200
      },
      () => false,
    )
    if (healthy) return { baseUrl, adminToken, logs: log, fullLog, stop }
    await delay(PROBE_INTERVAL_MS)
  }
  await killGroup(child, exited)
  throw new Error(`wrangler dev did not answer GET /healthz with 200 within ${READY_TIMEOUT_MS} ms:\n${log()}`)
}

/** SIGTERM to the process group (npx → wrangler → workerd), SIGKILL when it lingers. */
async function killGroup(child: ChildProcess, exited: Promise<unknown>): Promise<void> {
  const signal = (name: NodeJS.Signals) => {
    try {
      process.kill(-child.pid!, name)
    } catch {
      // The group is already gone.
    }
  }
  signal('SIGTERM')
  const timer = setTimeout(() => signal('SIGKILL'), 5_000)
  await exited
  clearTimeout(timer)
  live.delete(child.pid!)
  // workerd can outlive its parent for a moment; make sure no member of the group survives.
  signal('SIGKILL')
}

function collectOutput(child: ChildProcess): () => string {
  const lines: string[] = []
  const keep = (chunk: Buffer) => {
    lines.push(...chunk.toString('utf8').split('\n').filter(Boolean))
    if (lines.length > LOG_LINES) lines.splice(0, lines.length - LOG_LINES)
  }
  child.stdout?.on('data', keep)
  child.stderr?.on('data', keep)
  return () => lines.join('\n')
}

function runToCompletion(command: string, args: string[], timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: ROOT,
      env: WRANGLER_ENV,
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: timeoutMs,
    })
    const log = collectOutput(child)
    child.once('error', reject)
    child.once('exit', (code, signal) =>
      code === 0
        ? resolve()
        : reject(new Error(`${command} ${args.join(' ')} failed (${signal ?? `exit ${code}`}):\n${log()}`)),
    )
  })
}

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
