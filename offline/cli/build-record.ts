/**
 * What a build of the CLI (./build.ts) records about the files it was built from, and the check that a clone's
 * build still matches them. The record (`build.json` beside the build) holds a content hash per input; the check
 * stats every input and reads only those whose size, mtime or ctime moved since the build: a copy that keeps the
 * mtime (`cp -p`, `rsync -a`) still changes the ctime, and a touched or reverted file whose content is the same is
 * not stale.
 */
import { createHash } from 'node:crypto'
import { readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'

/**
 * The record's file name, in the build's folder.
 * @internal (./build.ts writes it: a build step, outside the production code)
 */
export const BUILD_RECORD = 'build.json'

/** One input as the build saw it. */
interface RecordedInput {
  sha256: string
  size: number
  mtimeMs: number
  ctimeMs: number
}

/**
 * `build.json`: every input of the build (paths relative to the repository root).
 * @internal
 */
export interface BuildRecord {
  inputs: Record<string, RecordedInput>
}

/**
 * The record of the inputs at `paths` (relative to `root`) as they are now.
 * @example recordInputs('/repo', ['offline/cli/index.ts']).inputs['offline/cli/index.ts'].sha256 // 'a3f1…'
 * @internal
 */
export function recordInputs(root: string, paths: readonly string[]): BuildRecord {
  const inputs: Record<string, RecordedInput> = {}
  for (const path of [...paths].sort()) {
    const file = join(root, path)
    const { size, mtimeMs, ctimeMs } = statSync(file)
    inputs[path] = { sha256: sha256(readFileSync(file)), size, mtimeMs, ctimeMs }
  }
  return { inputs }
}

/**
 * The inputs that differ from the record in `buildDir` (content changed, or the file is gone), in the record's
 * order; `['build.json']` when there is no readable record. Empty when the build is current.
 * @example staleInputs('/repo', '/repo/dist/cli') // ['offline/search/run.ts'] after an edit to it
 */
export function staleInputs(root: string, buildDir: string): string[] {
  let record: BuildRecord
  try {
    record = JSON.parse(readFileSync(join(buildDir, BUILD_RECORD), 'utf8')) as BuildRecord
  } catch {
    return [BUILD_RECORD]
  }
  const stale: string[] = []
  for (const [path, built] of Object.entries(record.inputs ?? {})) {
    const file = join(root, path)
    try {
      const now = statSync(file)
      if (now.size !== built.size) stale.push(path)
      else if (now.mtimeMs === built.mtimeMs && now.ctimeMs === built.ctimeMs) continue
      else if (sha256(readFileSync(file)) !== built.sha256) stale.push(path)
    } catch {
      stale.push(path)
    }
  }
  return stale
}

/**
 * The paths in a message: the first few, and how many more.
 * @example namePaths(['a.ts', 'b.ts', 'c.ts', 'd.ts']) // 'a.ts, b.ts, c.ts and 1 more'
 */
export function namePaths(paths: readonly string[], shown = 3): string {
  const named = paths.slice(0, shown).join(', ')
  return paths.length > shown ? `${named} and ${paths.length - shown} more` : named
}

function sha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex')
}
