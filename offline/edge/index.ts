/**
 * What every CLI command that talks to an edge shares: the admin token for a URL (from REWARD_HARNESS_ADMIN_TOKEN, or,
 * for a server on this machine only, from the project's `.dev.vars` that `npm start` wrote), and the one way a failed
 * connection is told: the URL tried, why, and what to do.
 */
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { UsageError } from '../../src/usage-error/index.ts'

/** The environment variable the admin token is read from (never a flag: flags show up in process lists). */
export const ADMIN_TOKEN_ENV = 'REWARD_HARNESS_ADMIN_TOKEN'
/** Set to 1 (or pass `--allow-insecure-http`) to send the admin token over plain http:// to another machine. */
const ALLOW_INSECURE_HTTP_ENV = 'REWARD_HARNESS_ALLOW_INSECURE_HTTP'
const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url))
/** Names the one `.dev.vars` file to read instead (a project in another folder; tests). */
const DEV_VARS_ENV = 'REWARD_HARNESS_DEV_VARS'
/** Where `.dev.vars` is looked for: the current directory, then this checkout's root. */
const DEV_VARS_DIRS = [process.cwd(), REPO_ROOT]

/**
 * Whether a URL names this machine (127.0.0.0/8, ::1, localhost): the only edge whose `.dev.vars` the CLI may read.
 * @example isLoopbackUrl('http://127.0.0.1:8787') // true
 * @internal
 */
export function isLoopbackUrl(url: string): boolean {
  let host: string
  try {
    host = new URL(url).hostname
  } catch {
    return false
  }
  return host === 'localhost' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host)
}

/**
 * The `.dev.vars` files the CLI may read, in order: the one REWARD_HARNESS_DEV_VARS names, else one in each of `dirs`.
 * @example devVarsFiles({}, ['/repo']) // ['/repo/.dev.vars']
 */
function devVarsFiles(env: Record<string, string | undefined>, dirs: readonly string[]): string[] {
  const named = env[DEV_VARS_ENV]?.trim()
  return named ? [named] : [...new Set(dirs.map((dir) => join(dir, '.dev.vars')))]
}

/** The ADMIN_TOKEN line of the first of `files` that has one. */
function devVarsAdminToken(files: readonly string[]): string | undefined {
  for (const file of files) {
    if (!existsSync(file)) continue
    const token = readFileSync(file, 'utf8').match(/^\s*ADMIN_TOKEN\s*=\s*"?([^"\n]+?)"?\s*$/m)?.[1]
    if (token) return token
  }
  return undefined
}

/**
 * The admin token for the edge at `url`: REWARD_HARNESS_ADMIN_TOKEN, else (a loopback URL only) `.dev.vars`.
 * @example adminTokenFor('http://127.0.0.1:8787', process.env) // the token npm start wrote
 */
export function adminTokenFor(
  url: string,
  env: Record<string, string | undefined>,
  dirs: readonly string[] = DEV_VARS_DIRS,
): string | undefined {
  const fromEnv = env[ADMIN_TOKEN_ENV]?.trim()
  if (fromEnv) return fromEnv
  return isLoopbackUrl(url) ? devVarsAdminToken(devVarsFiles(env, dirs)) : undefined
}

/**
 * {@link adminTokenFor}, or a UsageError saying where it looked and what to set.
 * @example const token = requireAdminToken('https://rm.example.com', process.env)
 */
export function requireAdminToken(
  url: string,
  env: Record<string, string | undefined>,
  dirs: readonly string[] = DEV_VARS_DIRS,
): string {
  refuseInsecureTransport(url, env)
  const token = adminTokenFor(url, env, dirs)
  if (token) return token
  if (isLoopbackUrl(url))
    throw new UsageError(
      `the admin token is missing: ${ADMIN_TOKEN_ENV} is unset and no ADMIN_TOKEN is in ` +
        `${devVarsFiles(env, dirs).join(' or ')}. Start the server once with \`npm start\` (it writes one), or set ` +
        `${ADMIN_TOKEN_ENV}`,
    )
  throw new UsageError(
    `the admin token is missing: set ${ADMIN_TOKEN_ENV} to the ADMIN_TOKEN of ${url} ` +
      '(.dev.vars is read for a server on this machine only)',
  )
}

/**
 * What to do when nothing answers at `url`, for the message of a network failure.
 * @example unreachableHint('http://127.0.0.1:8866') // 'Start the server with `npm start` …'
 */
export function unreachableHint(url: string): string {
  return isLoopbackUrl(url)
    ? 'Start the server with `npm start` (it serves on PORT, 8787 by default), or pass --url with the port it serves on'
    : 'Check --url, and that the Worker is deployed there (`curl <url>/healthz` answers {"status":"ok"})'
}

/**
 * Why a fetch failed, in words: the cause's code (ECONNREFUSED, ENOTFOUND) or message, or the timeout.
 * @example networkReason(new TypeError('fetch failed', { cause: { code: 'ECONNREFUSED' } })) // 'ECONNREFUSED'
 */
export function networkReason(error: unknown, timeoutMs?: number): string {
  if (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError'))
    return timeoutMs === undefined ? 'no answer in time' : `no answer within ${timeoutMs} ms`
  const cause = error instanceof Error ? (error.cause as { code?: string; message?: string } | undefined) : undefined
  return cause?.code ?? cause?.message ?? (error instanceof Error ? error.message : String(error))
}

/** Set for one command line by `--allow-insecure-http` (every command line sets it again). */
let insecureHttpAllowed = false

/**
 * What `--allow-insecure-http` said on this command line.
 * @example allowInsecureHttp(command.optsWithGlobals().allowInsecureHttp === true)
 */
export function allowInsecureHttp(allowed: boolean): void {
  insecureHttpAllowed = allowed
}

/**
 * Refuses to send a token (`what`: the admin token, a run's, an RM token) over plain http:// to a host that is not this
 * machine, where anyone on the path reads it, unless `--allow-insecure-http` (REWARD_HARNESS_ALLOW_INSECURE_HTTP=1)
 * says so.
 * @example refuseInsecureTransport('http://rm.example.com', {}) // throws a UsageError naming https:// and the flag
 */
export function refuseInsecureTransport(
  url: string,
  env: Record<string, string | undefined>,
  what = 'the admin token',
): void {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return
  }
  if (parsed.protocol !== 'http:' || isLoopbackUrl(url) || insecureHttpAllowed || env[ALLOW_INSECURE_HTTP_ENV] === '1')
    return
  throw new UsageError(
    `refusing to send ${what} over plain http:// to ${parsed.host}, which is not this machine: anyone on ` +
      'the path could read it. Use https://, or pass --allow-insecure-http (or set ' +
      `${ALLOW_INSECURE_HTTP_ENV}=1) for a network you trust`,
  )
}
