/**
 * Checkpoints of a search session: `<checkpoint dir>/<session_id>/state-<NNNN>.json`, one per boundary the engine
 * reports (a generation in global_batch, a finished prompt otherwise, and the end). Each is written atomically
 * (temp file, fsync, rename); "latest" is the highest NNNN parsed from the names, so a leftover temp file or a
 * stray file never counts (fixes autosr §8.10). A resumed run continues the same session's numbering.
 */
import { readdir, readFile, stat, unlink } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import type { SearchConfig, SearchState } from '../../src/search/index.ts'
import { writeFileAtomic } from './atomic.ts'
import { SearchInputError } from './errors.ts'

const CHECKPOINT_KIND = 'reward-harness.search-checkpoint'
const CHECKPOINT_VERSION = 1
const NAME = /^state-(\d{4,})\.json$/

/** What a checkpoint file holds: the engine's state and what a resume must match. */
export interface CheckpointFile {
  kind: typeof CHECKPOINT_KIND
  schema_version: typeof CHECKPOINT_VERSION
  session_id: string
  sequence: number
  /** The run (process) that wrote it. */
  run_id: string
  created_at_utc: string
  dataset: { path: string; sha256: string }
  config_hash: string
  config: SearchConfig
  /** Role and backend settings that change answers (locale, scale, extraction, models, …), and their hash. */
  settings_hash: string
  settings: Record<string, unknown>
  state: SearchState
}

/**
 * The file name of checkpoint `sequence`.
 * @example checkpointName(7) // 'state-0007.json'
 */
function checkpointName(sequence: number): string {
  return `state-${String(sequence).padStart(4, '0')}.json`
}

/**
 * The checkpoints of a session directory, ascending by their parsed number (temp and other files ignored).
 * @example (await listCheckpoints('out/checkpoints/20260101_120000_000000')).at(-1) // { sequence: 9, file:
 *   '…/state-0009.json' }
 * @internal
 */
export async function listCheckpoints(directory: string): Promise<Array<{ sequence: number; file: string }>> {
  let names: string[]
  try {
    names = await readdir(directory)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return []
    throw error
  }
  return names
    .flatMap((name) => {
      const match = NAME.exec(name)
      return match ? [{ sequence: Number(match[1]), file: join(directory, name) }] : []
    })
    .sort((a, b) => a.sequence - b.sequence)
}

/**
 * Writes a session's checkpoints and prunes old ones.
 * @example
 * const store = await CheckpointStore.open('out/checkpoints', '20260101_120000_000000', { keep: 3 })
 * const file = await store.save({ ...identity, state })
 */
export class CheckpointStore {
  readonly directory: string
  #next: number
  #written = 0
  #latest: string | null

  private constructor(
    directory: string,
    next: number,
    latest: string | null,
    private readonly keep: number,
  ) {
    this.directory = directory
    this.#next = next
    this.#latest = latest
  }

  /**
   * The store of `<root>/<sessionId>`, numbering on from the session's latest checkpoint. `keep` 0 keeps all.
   * @example const store = await CheckpointStore.open(root, sessionId, { keep: 3 })
   */
  static async open(root: string, sessionId: string, options: { keep: number }): Promise<CheckpointStore> {
    const directory = join(root, sessionId)
    const existing = await listCheckpoints(directory)
    const last = existing.at(-1)
    return new CheckpointStore(directory, (last?.sequence ?? 0) + 1, last?.file ?? null, options.keep)
  }

  /**
   * The newest checkpoint file of the session (written by this run or before), or null.
   * @example store.latest // '/out/checkpoints/20260101_120000_000000/state-0004.json'
   */
  get latest(): string | null {
    return this.#latest
  }

  /**
   * Checkpoints this process wrote.
   * @example store.written // 4
   */
  get written(): number {
    return this.#written
  }

  /**
   * Writes the next checkpoint atomically and returns its path; then deletes all but the newest `keep`.
   * @example const file = await store.save(payload) // '…/state-0004.json'
   */
  async save(
    payload: Omit<CheckpointFile, 'kind' | 'schema_version' | 'sequence' | 'created_at_utc'>,
  ): Promise<string> {
    const sequence = this.#next++
    const file = join(this.directory, checkpointName(sequence))
    const body: CheckpointFile = {
      kind: CHECKPOINT_KIND,
      schema_version: CHECKPOINT_VERSION,
      sequence,
      created_at_utc: new Date().toISOString(),
      ...payload,
    }
    await writeFileAtomic(file, `${JSON.stringify(body)}\n`)
    this.#latest = file
    this.#written++
    if (this.keep > 0) {
      const all = await listCheckpoints(this.directory)
      await Promise.all(
        all.slice(0, Math.max(0, all.length - this.keep)).map((old) => unlink(old.file).catch(() => undefined)),
      )
    }
    return file
  }
}

/**
 * Finds and reads the checkpoint `--resume` names: an existing file path, else a session id under `root`
 * (its latest checkpoint). Errors name the flag and say what was looked for.
 * @example const { file, checkpoint } = await loadResumeCheckpoint('20260101_120000_000000', 'out/checkpoints')
 */
export async function loadResumeCheckpoint(
  reference: string,
  root: string,
  cwd: string = process.cwd(),
): Promise<{ file: string; checkpoint: CheckpointFile }> {
  let file: string | undefined
  const asPath = resolve(cwd, reference)
  const info = await stat(asPath).catch(() => null)
  if (info?.isFile()) file = asPath
  else if (info?.isDirectory()) file = (await listCheckpoints(asPath)).at(-1)?.file
  else if (/^[\w.-]+$/.test(reference)) file = (await listCheckpoints(join(root, reference))).at(-1)?.file
  if (!file) {
    const sessions = await listSessions(root)
    throw new SearchInputError(
      `--resume ${reference}: no checkpoint file or session with checkpoints found (looked for a file, and for ` +
        `${join(root, reference)}/state-NNNN.json)` +
        (sessions.length ? `; sessions under ${root}: ${sessions.slice(-5).join(', ')}` : ''),
    )
  }
  let checkpoint: CheckpointFile
  try {
    checkpoint = JSON.parse(await readFile(file, 'utf8')) as CheckpointFile
  } catch (error) {
    throw new SearchInputError(
      `--resume ${reference}: ${file} is not a readable checkpoint (${(error as Error).message})`,
    )
  }
  if (
    checkpoint?.kind !== CHECKPOINT_KIND ||
    checkpoint.schema_version !== CHECKPOINT_VERSION ||
    typeof checkpoint.state !== 'object' ||
    checkpoint.state === null
  ) {
    throw new SearchInputError(
      `--resume ${reference}: ${file} is not a search checkpoint of schema version ${CHECKPOINT_VERSION}`,
    )
  }
  return { file, checkpoint }
}

async function listSessions(root: string): Promise<string[]> {
  try {
    return (await readdir(root, { withFileTypes: true }))
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name)
      .sort()
  } catch {
    return []
  }
}

/**
 * The differences between two flat settings objects, as `key: before → after` (compared as JSON).
 * @example describeChanges({ generations: 12 }, { generations: 4 }) // ['generations: 12 → 4']
 */
export function describeChanges(before: Record<string, unknown>, after: Record<string, unknown>): string[] {
  const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort()
  return keys.flatMap((key) => {
    const a = JSON.stringify(before[key])
    const b = JSON.stringify(after[key])
    return a === b ? [] : [`${key}: ${a ?? 'unset'} → ${b ?? 'unset'}`]
  })
}
