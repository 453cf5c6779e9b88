import { mkdtemp, readFile, readdir, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { checkpoint, loadLibrary, saveLibrary } from '../../offline/library/index.ts'
import {
  addEntry,
  deleteEntry,
  modifyEntry,
  emptyLibrary,
  isEntryName,
  LibraryError,
  parseSkillMd,
  renderSkillMd,
  type LibraryEntry,
} from '../../src/library/index.ts'

const skill: LibraryEntry = {
  name: 'be-specific',
  kind: 'skill',
  description: 'Prefer specific, evidenced answers',
  body: 'Reward concrete facts and numbers.',
}
const tool: LibraryEntry = {
  name: 'coverage-check',
  kind: 'tool',
  description: 'Checks instruction coverage',
  when_to_use: 'When an instruction has several parts',
  body: 'You check which parts of the instruction each answer covers. Reply JSON.',
}

describe('library model', () => {
  it('enforces kebab-case names everywhere', () => {
    expect(isEntryName('a-b-1')).toBe(true)
    for (const bad of ['A', 'a_b', '../x', 'a--b', '-a', 'a/b', '']) expect(isEntryName(bad)).toBe(false)
    expect(() => addEntry(emptyLibrary(), { ...skill, name: '../evil' })).toThrow(LibraryError)
    expect(() => parseSkillMd('---\nname: Bad Name\nkind: skill\ndescription: d\n---\nbody')).toThrow(LibraryError)
  })

  it('round-trips SKILL.md front matter and body', () => {
    expect(parseSkillMd(renderSkillMd(tool))).toEqual({ ...tool, body: `${tool.body}\n` })
    expect(renderSkillMd(tool)).toContain('when_to_use: When an instruction has several parts')
    expect(() => addEntry(addEntry(emptyLibrary(), skill), skill)).toThrow(/already exists/)
  })
})

describe('library on disk', () => {
  it('saves registry v2 with hashes, loads, adds, modifies, deletes, checkpoints', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lib-'))
    await saveLibrary(addEntry(addEntry(emptyLibrary(), skill), tool), dir)
    const registry = JSON.parse(await readFile(join(dir, 'registry.json'), 'utf8'))
    expect(registry.schema_version).toBe(2)
    expect(registry.library.status).toBe('active')
    expect(registry.entries['coverage-check']).toMatchObject({ kind: 'tool', path: 'tools/coverage-check/SKILL.md' })
    expect(registry.entries['be-specific'].sha256).toMatch(/^[0-9a-f]{64}$/)
    expect(await readFile(join(dir, 'tools/coverage-check/SKILL.md'), 'utf8')).toMatch(
      /^---\nname: coverage-check\nkind: tool\n/,
    )

    const changed = modifyEntry(await loadLibrary(dir), 'be-specific', { body: 'New rubric.' })
    await saveLibrary(changed, dir)
    expect(changed.entries['be-specific']?.body).toBe('New rubric.\n')
    expect((await loadLibrary(dir)).entries['be-specific']?.body).toBe('New rubric.\n')

    const copy = join(dir, 'checkpoints', 'iter-1')
    await checkpoint(await loadLibrary(dir), copy)
    expect(Object.keys((await loadLibrary(copy)).entries).sort()).toEqual(['be-specific', 'coverage-check'])

    await saveLibrary(deleteEntry(await loadLibrary(dir), 'coverage-check'), dir)
    expect(await readdir(join(dir, 'tools'))).toEqual([])
    expect(Object.keys((await loadLibrary(dir)).entries)).toEqual(['be-specific'])
    expect(Object.keys((await loadLibrary(copy)).entries)).toHaveLength(2)
  })

  it('refuses a document edited behind the registry (hash mismatch) and an empty dir is an empty library', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lib-'))
    expect((await loadLibrary(dir)).entries).toEqual({})
    await saveLibrary(addEntry(emptyLibrary('x'), skill), dir)
    await writeFile(join(dir, 'skills/be-specific/SKILL.md'), renderSkillMd({ ...skill, body: 'tampered' }))
    await expect(loadLibrary(dir)).rejects.toThrow(/sha256/)
  })
})
