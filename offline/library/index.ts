/**
 * The library on disk: `<lib>/registry.json` (schema v2) and `skills|tools/<name>/SKILL.md`. Every file is
 * written atomically (temp file, fsync, rename); a save is exact: documents of entries no longer in the
 * library are removed. Loading checks each document against the registry's content hash.
 */
import { readFile, readdir, rm } from 'node:fs/promises'
import { basename, join, resolve } from 'node:path'
import {
  buildRegistry,
  emptyLibrary,
  entryHash,
  entryPath,
  type Library,
  LibraryError,
  parseRegistry,
  parseSkillMd,
  renderSkillMd,
} from '../../src/library/index.ts'
import { writeFileAtomic } from '../search/atomic.ts'

/**
 * Loads a library directory. A directory without registry.json is an empty library named after it.
 * Throws a LibraryError on a bad registry, a missing document, a name/kind mismatch or a hash mismatch.
 * @example const lib = await loadLibrary('runs/a/checkpoints/best')
 */
export async function loadLibrary(dir: string): Promise<Library> {
  let text: string
  try {
    text = await readFile(join(dir, 'registry.json'), 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return emptyLibrary(basename(resolve(dir)))
    throw error
  }
  let raw: unknown
  try {
    raw = JSON.parse(text)
  } catch {
    throw new LibraryError(`${join(dir, 'registry.json')}: not JSON`)
  }
  const registry = parseRegistry(raw)
  const library: Library = { id: registry.library.id, status: registry.library.status, entries: {} }
  for (const [name, record] of Object.entries(registry.entries)) {
    const file = join(dir, record.path)
    const entry = parseSkillMd(await readFile(file, 'utf8'), file)
    if (entry.name !== name || entry.kind !== record.kind)
      throw new LibraryError(
        `${file}: front matter says ${entry.kind} ${entry.name}, the registry ${record.kind} ${name}`,
      )
    if ((await entryHash(entry)) !== record.sha256)
      throw new LibraryError(`${file}: content does not match the registry's sha256`)
    library.entries[name] = entry
  }
  return library
}

/**
 * Writes `library` to `dir` exactly: every document, then registry.json, then removes the documents of
 * entries not in the library.
 * @example await saveLibrary(lib, 'my-lib')
 * @internal
 */
export async function saveLibrary(library: Library, dir: string): Promise<void> {
  for (const entry of Object.values(library.entries))
    await writeFileAtomic(join(dir, entryPath(entry)), renderSkillMd(entry))
  const registry = await buildRegistry(library)
  await writeFileAtomic(join(dir, 'registry.json'), `${JSON.stringify(registry, null, 2)}\n`)
  for (const kindDir of ['skills', 'tools'] as const) {
    let names: string[]
    try {
      names = await readdir(join(dir, kindDir))
    } catch {
      continue
    }
    for (const name of names) {
      const entry = library.entries[name]
      if (!entry || (kindDir === 'skills') !== (entry.kind === 'skill'))
        await rm(join(dir, kindDir, name), { recursive: true, force: true })
    }
  }
}

/**
 * Writes a full copy of `library` to `dir`, replacing whatever was there. A checkpoint is itself a library.
 * @example await checkpoint(lib, 'runs/a/checkpoints/iter-3')
 */
export async function checkpoint(library: Library, dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true })
  await saveLibrary(library, dir)
}
