/**
 * The judge library (RewardHarness §1), as a pure model: named skills (rubrics) and tools (system prompts run
 * as sub-calls), each a SKILL.md document with front matter, plus a schema-v2 registry with a content hash per
 * entry. No file system here: offline/library reads and writes it.
 */
import { sha256Hex } from '../hash/index.ts'
import { UsageError } from '../usage-error/index.ts'

type EntryKind = 'skill' | 'tool'

/** One entry. For a tool, `body` is the tool's system prompt; `when_to_use` tells the Sub-Agent when to call it. */
export interface LibraryEntry {
  name: string
  kind: EntryKind
  description: string
  when_to_use?: string
  body: string
}

export interface Library {
  id: string
  status: string
  /** Entries by name; one namespace for skills and tools. */
  entries: Record<string, LibraryEntry>
}

interface RegistryEntry {
  kind: EntryKind
  description: string
  path: string
  sha256: string
}

export interface Registry {
  schema_version: 2
  library: { id: string; status: string }
  entries: Record<string, RegistryEntry>
}

/** A library or registry that does not follow the rules (bad name, bad kind, bad front matter, hash mismatch). */
export class LibraryError extends UsageError {
  constructor(message: string) {
    super(message)
    this.name = 'LibraryError'
  }
}

const NAME = /^[a-z0-9]+(-[a-z0-9]+)*$/

/**
 * True for a lowercase kebab-case name (`^[a-z0-9]+(-[a-z0-9]+)*$`): no dots, slashes or spaces, so a name is
 * always a safe directory name.
 * @example isEntryName('length-bias-check') // true; isEntryName('../x') // false
 * @internal
 */
export function isEntryName(name: string): boolean {
  return NAME.test(name)
}

/**
 * Throws a LibraryError unless `name` is kebab-case.
 * @example assertEntryName('ok-name')
 */
function assertEntryName(name: string): void {
  if (!isEntryName(name)) throw new LibraryError(`entry name ${JSON.stringify(name)} is not lowercase kebab-case`)
}

/**
 * An empty library.
 * @example emptyLibrary('demo') // { id: 'demo', status: 'active', entries: {} }
 */
export function emptyLibrary(id = 'library', status = 'active'): Library {
  return { id, status, entries: {} }
}

function checkEntry(entry: LibraryEntry): LibraryEntry {
  assertEntryName(entry.name)
  if (entry.kind !== 'skill' && entry.kind !== 'tool')
    throw new LibraryError(`entry ${entry.name}: kind must be skill or tool`)
  if (!entry.description.trim()) throw new LibraryError(`entry ${entry.name}: description is empty`)
  if (/[\r\n]/.test(entry.description) || /[\r\n]/.test(entry.when_to_use ?? ''))
    throw new LibraryError(`entry ${entry.name}: description and when_to_use are one line each`)
  if (!entry.body.trim()) throw new LibraryError(`entry ${entry.name}: body is empty`)
  const clean: LibraryEntry = {
    name: entry.name,
    kind: entry.kind,
    description: entry.description.trim(),
    body: `${entry.body.trim()}\n`,
  }
  if (entry.kind === 'tool') clean.when_to_use = (entry.when_to_use ?? entry.description).trim()
  return clean
}

/**
 * A copy of `library` with a new entry. Throws when the name exists (use modifyEntry) or breaks the rules.
 * @example addEntry(emptyLibrary(), { name: 'be-concise', kind: 'skill', description: 'Prefer concise answers', body:
 *   'Reward…' })
 */
export function addEntry(library: Library, entry: LibraryEntry): Library {
  assertEntryName(entry.name)
  if (library.entries[entry.name]) throw new LibraryError(`entry ${entry.name} already exists`)
  return { ...library, entries: { ...library.entries, [entry.name]: checkEntry(entry) } }
}

/**
 * A copy of `library` with entry `name` changed (description, when_to_use and/or body; kind and name stay).
 * @example modifyEntry(lib, 'be-concise', { body: 'Reward answers that…' })
 */
export function modifyEntry(
  library: Library,
  name: string,
  change: Partial<Pick<LibraryEntry, 'description' | 'when_to_use' | 'body'>>,
): Library {
  assertEntryName(name)
  const current = library.entries[name]
  if (!current) throw new LibraryError(`no entry ${name}`)
  const next = checkEntry({
    ...current,
    ...Object.fromEntries(Object.entries(change).filter(([, value]) => value !== undefined)),
  })
  return { ...library, entries: { ...library.entries, [name]: next } }
}

/**
 * A copy of `library` without entry `name`.
 * @example deleteEntry(lib, 'be-concise')
 */
export function deleteEntry(library: Library, name: string): Library {
  assertEntryName(name)
  if (!library.entries[name]) throw new LibraryError(`no entry ${name}`)
  const entries = { ...library.entries }
  delete entries[name]
  return { ...library, entries }
}

/**
 * Entries sorted by name, skills first.
 * @example entryList(lib).map((entry) => entry.name)
 */
export function entryList(library: Library): LibraryEntry[] {
  return Object.values(library.entries).sort((a, b) =>
    a.kind === b.kind ? a.name.localeCompare(b.name) : a.kind === 'skill' ? -1 : 1,
  )
}

/**
 * The relative path of an entry's document.
 * @example entryPath({ name: 'x', kind: 'tool' }) // 'tools/x/SKILL.md'
 */
export function entryPath(entry: Pick<LibraryEntry, 'name' | 'kind'>): string {
  assertEntryName(entry.name)
  return `${entry.kind === 'skill' ? 'skills' : 'tools'}/${entry.name}/SKILL.md`
}

/**
 * An entry as its SKILL.md: `---` front matter (`name`, `kind`, `description`, `when_to_use` for tools) then the body.
 * @example renderSkillMd(entry) // '---\nname: be-concise\nkind: skill\ndescription: …\n---\n\nReward…\n'
 */
export function renderSkillMd(entry: LibraryEntry): string {
  const clean = checkEntry(entry)
  const lines = ['---', `name: ${clean.name}`, `kind: ${clean.kind}`, `description: ${clean.description}`]
  if (clean.kind === 'tool') lines.push(`when_to_use: ${clean.when_to_use}`)
  lines.push('---', '', clean.body)
  return lines.join('\n')
}

/**
 * Reads a SKILL.md. The front matter is `key: value` lines between `---` lines at the very start; a value may be
 * quoted. Unknown keys are ignored; `name`, `kind` and `description` are required.
 * @example parseSkillMd('---\nname: a\nkind: skill\ndescription: d\n---\nbody').name // 'a'
 */
export function parseSkillMd(text: string, where = 'SKILL.md'): LibraryEntry {
  const match = /^---\r?\n([\s\S]*?)\r?\n---\r?\n?([\s\S]*)$/.exec(text)
  if (!match) throw new LibraryError(`${where}: no front matter`)
  const fields: Record<string, string> = {}
  for (const line of match[1]!.split(/\r?\n/)) {
    if (!line.trim() || line.trimStart().startsWith('#')) continue
    const colon = line.indexOf(':')
    if (colon < 0) throw new LibraryError(`${where}: front matter line without a colon: ${JSON.stringify(line)}`)
    let value = line.slice(colon + 1).trim()
    if (
      value.length >= 2 &&
      ((value.startsWith('"') && value.endsWith('"')) || (value.startsWith("'") && value.endsWith("'")))
    )
      value = value.slice(1, -1)
    fields[line.slice(0, colon).trim()] = value
  }
  const { name, kind, description, when_to_use } = fields
  if (!name || !kind || !description) throw new LibraryError(`${where}: front matter needs name, kind and description`)
  if (kind !== 'skill' && kind !== 'tool')
    throw new LibraryError(`${where}: kind must be skill or tool, not ${JSON.stringify(kind)}`)
  try {
    return checkEntry({ name, kind, description, body: match[2]!, ...(when_to_use ? { when_to_use } : {}) })
  } catch (error) {
    throw new LibraryError(`${where}: ${(error as Error).message}`)
  }
}

/**
 * The SHA-256 (hex) of an entry's SKILL.md text.
 * @example await entryHash(entry) // '3f…'
 */
export async function entryHash(entry: LibraryEntry): Promise<string> {
  return sha256Hex(renderSkillMd(entry))
}

/**
 * The schema-v2 registry of a library, with per-entry content hashes.
 * @example (await buildRegistry(lib)).entries['be-concise']?.path // 'skills/be-concise/SKILL.md'
 */
export async function buildRegistry(library: Library): Promise<Registry> {
  const entries: Record<string, RegistryEntry> = {}
  for (const entry of entryList(library))
    entries[entry.name] = {
      kind: entry.kind,
      description: entry.description,
      path: entryPath(entry),
      sha256: await entryHash(entry),
    }
  return { schema_version: 2, library: { id: library.id, status: library.status }, entries }
}

/**
 * A hash of the whole library state (id excluded): equal libraries hash alike. Keys caches and logs.
 * @example await libraryHash(lib)
 */
export async function libraryHash(library: Library): Promise<string> {
  const registry = await buildRegistry(library)
  return sha256Hex(JSON.stringify(Object.entries(registry.entries).map(([name, entry]) => [name, entry.sha256])))
}

/**
 * Validates a parsed registry.json (schema v2 only).
 * @example parseRegistry(JSON.parse(text))
 */
export function parseRegistry(value: unknown): Registry {
  const fail = (reason: string): never => {
    throw new LibraryError(`registry.json: ${reason}`)
  }
  if (typeof value !== 'object' || value === null) return fail('not an object')
  const record = value as Record<string, unknown>
  if (record.schema_version !== 2) fail(`schema_version must be 2, not ${JSON.stringify(record.schema_version)}`)
  const library = record.library as Record<string, unknown> | undefined
  if (!library || typeof library.id !== 'string' || typeof library.status !== 'string')
    fail('library must be {id, status}')
  const entries = record.entries
  if (typeof entries !== 'object' || entries === null || Array.isArray(entries))
    return fail('entries must be an object')
  const out: Record<string, RegistryEntry> = {}
  for (const [name, raw] of Object.entries(entries as Record<string, unknown>)) {
    if (!isEntryName(name)) fail(`entry name ${JSON.stringify(name)} is not lowercase kebab-case`)
    const entry = raw as Record<string, unknown>
    if (entry.kind !== 'skill' && entry.kind !== 'tool') fail(`entry ${name}: bad kind`)
    if (typeof entry.description !== 'string' || typeof entry.path !== 'string' || typeof entry.sha256 !== 'string')
      fail(`entry ${name}: description, path and sha256 are strings`)
    const expected = entryPath({ name, kind: entry.kind as EntryKind })
    if (entry.path !== expected) fail(`entry ${name}: path must be ${expected}`)
    out[name] = {
      kind: entry.kind as EntryKind,
      description: entry.description as string,
      path: entry.path as string,
      sha256: entry.sha256 as string,
    }
  }
  return { schema_version: 2, library: { id: library!.id as string, status: library!.status as string }, entries: out }
}
