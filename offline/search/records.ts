/**
 * Run records (autosr §1.4): `<output dir>/run_records/<stem>_<run_id>.manifest.json` — what ran, on what, with
 * which settings and code — and `<stem>_<run_id>.replay.sh`, a bash script that runs the same command again from
 * any directory. Manifests never hold API keys, only the names of the variables that hold them.
 */
import { execFile } from 'node:child_process'
import { basename, dirname, extname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { canonicalJson } from '../../src/hash/index.ts'
import { hashHex } from '../../src/search/index.ts'
import { writeFileAtomic } from './atomic.ts'

/** The package's root (a clone's, or the installed package's): where the replay script `cd`s to, beside the bin. */
export const REPO_ROOT = resolve(fileURLToPath(import.meta.url), '../../..')

/** Flags whose value is a path: made absolute in the normalised argv. */
const PATH_FLAGS = [
  '--dataset',
  '--output',
  '--config',
  '--endpoints-file',
  '--preset-rubrics',
  '--cache-dir',
  '--checkpoint-dir',
] as const
/**
 * Flags left out of the replayed command: a replay runs the whole search (no resume) and is never interrupted by a test
 * hook.
 */
const DROPPED_FLAGS = ['--resume', '--abort-after-calls', '--mock-latency-ms'] as const

/**
 * A run id: UTC `YYYYMMDDTHHMMSS_ffffffZ` (microseconds; the last three digits from the high-resolution clock).
 * @example newRunId(new Date('2026-02-22T12:00:00.123Z')) // '20260222T120000_123xyzZ'
 */
export function newRunId(now: Date = new Date()): string {
  const pad = (value: number, width = 2) => String(value).padStart(width, '0')
  const micro = Number(process.hrtime.bigint() % 1000n)
  return (
    `${now.getUTCFullYear()}${pad(now.getUTCMonth() + 1)}${pad(now.getUTCDate())}T${pad(now.getUTCHours())}` +
    `${pad(now.getUTCMinutes())}${pad(now.getUTCSeconds())}` +
    `_${pad(now.getUTCMilliseconds(), 3)}${pad(micro, 3)}Z`
  )
}

/**
 * The checkpoint session id of a run id: no trailing Z, T → _ (autosr's convention).
 * @example sessionIdOf('20260222T120000_123456Z') // '20260222_120000_123456'
 */
export function sessionIdOf(runId: string): string {
  return runId.replace(/Z$/, '').replace('T', '_')
}

/**
 * A command line with the values of path flags made absolute (both `--flag v` and `--flag=v`), and without the
 * flags a replay must not repeat (`--resume`, test hooks). The `search` command word stays where it was.
 * @example normaliseArgv(['search', '--dataset', 'examples/demo.json', '--resume', 's1'], '/repo') // ['search',
 *   '--dataset', '/repo/examples/demo.json']
 */
export function normaliseArgv(argv: readonly string[], cwd: string): string[] {
  const out: string[] = []
  for (let index = 0; index < argv.length; index++) {
    const arg = argv[index]!
    const eq = arg.indexOf('=')
    const flag = arg.startsWith('--') && eq > 0 ? arg.slice(0, eq) : arg
    if ((DROPPED_FLAGS as readonly string[]).includes(flag)) {
      if (eq < 0) index++
      continue
    }
    if ((PATH_FLAGS as readonly string[]).includes(flag)) {
      if (eq > 0) out.push(`${flag}=${resolve(cwd, arg.slice(eq + 1))}`)
      else {
        out.push(arg)
        const value = argv[index + 1]
        if (value !== undefined) {
          out.push(resolve(cwd, value))
          index++
        }
      }
      continue
    }
    out.push(arg)
  }
  return out
}

/**
 * The commit and dirtiness of the repository, or null when git is unavailable.
 * @example await gitSnapshot(REPO_ROOT) // { commit: 'f39f812…', dirty: true }
 */
export async function gitSnapshot(root: string = REPO_ROOT): Promise<{ commit: string; dirty: boolean } | null> {
  const git = (args: string[]) =>
    new Promise<string | null>((done) => {
      execFile('git', args, { cwd: root, timeout: 5_000, maxBuffer: 16 * 1024 * 1024 }, (error, stdout) =>
        done(error ? null : stdout),
      )
    })
  // One git process for both answers (`# branch.oid <commit>`, then a line per change): each spawn costs the CLI more
  // CPU than the command itself.
  const status = await git(['status', '--porcelain=v2', '--branch', '--untracked-files=no'])
  const commit = status ? /^# branch\.oid ([0-9a-f]{40,64})$/m.exec(status)?.[1] : undefined
  if (!commit) return null
  return { commit, dirty: status!.split('\n').some((line) => line !== '' && !line.startsWith('#')) }
}

/**
 * Quotes a word for bash (single quotes; embedded quotes escaped).
 * @example shellQuote("it's") // "'it'\\''s'"
 */
export function shellQuote(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`
}

/**
 * The replay script: bash, `set -euo pipefail`, `cd` to the repository root, a check of the API-key variables
 * (openai backend only), then `./reward-harness <argv>` with any extra arguments appended (so
 * `bash replay.sh --output /tmp/elsewhere/best.json` replays into a fresh directory).
 * @example replayScript({ runId, argv: ['search', '--dataset', '/abs/demo.json', '--output', '/abs/out/best.json'],
 *   apiKeyEnvs: [] })
 */
export function replayScript(input: {
  runId: string
  argv: readonly string[]
  apiKeyEnvs: readonly string[]
  repoRoot?: string
}): string {
  const root = input.repoRoot ?? REPO_ROOT
  const command = ['./reward-harness', ...input.argv].map(shellQuote).join(' ')
  const lines = [
    '#!/usr/bin/env bash',
    `# Replays reward-harness search run ${input.runId}.`,
    '# Extra arguments are appended to the command, e.g. --output /tmp/replay/best.json to write (and cache) ' +
      'elsewhere.',
    'set -euo pipefail',
    `cd ${shellQuote(root)}`,
    ...input.apiKeyEnvs.flatMap((name) => [
      `if [ -z "\${${name}:-}" ]; then`,
      `  echo "replay: the environment variable ${name} (API key of the openai backend) is not set" >&2`,
      '  exit 1',
      'fi',
    ]),
    `echo "+ ${command.replace(/["\\$`]/g, '\\$&')} $*" >&2`,
    `exec ${command} "$@"`,
    '',
  ]
  return lines.join('\n')
}

/**
 * The run-record paths of an output file and run id.
 * @example recordPaths('/out/best.json', '20260222T120000_123456Z').replay //
 *   '/out/run_records/best_20260222T120000_123456Z.replay.sh'
 */
export function recordPaths(output: string, runId: string): { directory: string; manifest: string; replay: string } {
  const directory = join(dirname(output), 'run_records')
  const stem = basename(output, extname(output))
  return {
    directory,
    manifest: join(directory, `${stem}_${runId}.manifest.json`),
    replay: join(directory, `${stem}_${runId}.replay.sh`),
  }
}

/**
 * Writes the manifest (JSON) and the replay script (mode 755), both atomically.
 * @example await writeRunRecords(paths, manifest, script)
 */
export async function writeRunRecords(
  paths: { manifest: string; replay: string },
  manifest: unknown,
  script: string,
): Promise<void> {
  await writeFileAtomic(paths.manifest, `${JSON.stringify(manifest, null, 2)}\n`)
  await writeFileAtomic(paths.replay, script, { mode: 0o755 })
}

/**
 * The hash a run manifest records for its `settings` (backend, models, sampling, locale, scale, extraction):
 * resume and export both check it.
 * @example settingsHash({ backend: 'mock', locale: 'en' }) // '9c1e…' (16 hex digits)
 */
export function settingsHash(settings: unknown): string {
  return hashHex(canonicalJson(settings))
}
