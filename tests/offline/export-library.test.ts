import { mkdtemp, readFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { beforeAll, describe, expect, it } from 'vitest'
import { exportLibraryArtifact } from '../../offline/artifacts/library-export.ts'
import { readLog } from '../../offline/evolve/run.ts'
import { AnyRmArtifact, LibraryArtifact, RmArtifact, verifyArtifactId } from '../../src/schemas/artifact.ts'
import { runCli } from '../support/cli.ts'

const FIXTURE = 'offline/evolve/fixtures/pairs-demo.json'

const run = runCli

describe('export --library (an evolved judge library → a library artifact)', () => {
  let runDir = ''
  beforeAll(async () => {
    runDir = await mkdtemp(join(tmpdir(), 'evolve-lib-'))
    const evolved = await run(
      'evolve',
      '--dataset',
      FIXTURE,
      '--out',
      runDir,
      '--iterations',
      '2',
      '--backend',
      'mock',
      '--seed',
      '42',
      '--no-cache',
    )
    expect(evolved.code).toBe(0)
  }, 60_000)

  it(
    'writes a valid, content-addressed library artifact with entries, registry hash, provenance and runtime; the id ' +
      'is stable',
    async () => {
      const best = join(runDir, 'checkpoints', 'best')
      const outDir = await mkdtemp(join(tmpdir(), 'lib-art-'))
      const first = await exportLibraryArtifact({ library: best, out: join(outDir, 'a.json') })
      const second = await exportLibraryArtifact({ library: best, out: join(outDir, 'b.json') })
      expect(first.artifact.artifact_id).toMatch(/^rm_[0-9a-f]{64}$/)
      expect(second.artifact.artifact_id).toBe(first.artifact.artifact_id)
      expect(await readFile(join(outDir, 'a.json'), 'utf8')).toBe(await readFile(join(outDir, 'b.json'), 'utf8'))

      const parsed = AnyRmArtifact.parse(JSON.parse(await readFile(join(outDir, 'a.json'), 'utf8')))
      expect(parsed.kind).toBe('library')
      expect(LibraryArtifact.safeParse(parsed).success).toBe(true)
      expect(RmArtifact.safeParse(parsed).success).toBe(false)
      expect(await verifyArtifactId(parsed)).toBe(true)

      const artifact = first.artifact
      expect(artifact.entries.map((entry) => entry.name)).toContain('instruction-coverage')
      for (const entry of artifact.entries) expect(entry.sha256).toMatch(/^[0-9a-f]{64}$/)
      const log = await readLog(join(runDir, 'evolution-log.jsonl'))
      const last = log.at(-1)!
      expect(artifact.provenance).toMatchObject({
        best_iteration: last.best_iteration,
        best_val_accuracy: last.best_val_accuracy,
        iterations: 2,
        library_sha256: last.best_library_sha256,
        dataset_sha256: last.settings.dataset_sha256,
      })
      expect(artifact.provenance.registry_sha256).toMatch(/^[0-9a-f]{64}$/)
      expect(artifact.provenance.evolution_log_sha256).toMatch(/^[0-9a-f]{64}$/)
      expect(artifact.runtime).toMatchObject({
        backend: 'mock',
        locale: 'en',
        temperature: 0,
        seed: 42,
        max_tool_calls: 3,
      })
      expect(artifact.created_at_utc).toBe(last.timestamp)

      // A change to any entry changes the id: the content address covers the bodies.
      const tampered = {
        ...parsed,
        entries: parsed.kind === 'library' ? parsed.entries.map((entry) => ({ ...entry, body: `${entry.body}x` })) : [],
      }
      expect(await verifyArtifactId(AnyRmArtifact.parse(tampered))).toBe(false)
    },
  )

  it('runs from the CLI (--json) and refuses bad input with exit code 2', async () => {
    const outDir = await mkdtemp(join(tmpdir(), 'lib-cli-'))
    const best = join(runDir, 'checkpoints', 'best')
    const ok = await run('export', '--library', best, '--out', join(outDir, 'rm.json'), '--json')
    expect(ok.code).toBe(0)
    const report = JSON.parse(ok.out)
    expect(report).toMatchObject({ kind: 'library', out: join(outDir, 'rm.json') })
    expect(report.artifact_id).toBe(JSON.parse(await readFile(join(outDir, 'rm.json'), 'utf8')).artifact_id)
    const text = await run('export', '--library', best, '--out', join(outDir, 'rm2.json'))
    expect(text.out).toMatch(/wrote rm_[0-9a-f]{64}/)

    expect((await run('export', '--out', join(outDir, 'x.json'))).code).toBe(2)
    expect(
      (await run('export', '--library', best, '--search-output', 'nope.json', '--out', join(outDir, 'x.json'))).code,
    ).toBe(2)
    const empty = await run(
      'export',
      '--library',
      await mkdtemp(join(tmpdir(), 'empty-')),
      '--out',
      join(outDir, 'x.json'),
    )
    expect(empty.code).toBe(2)
    expect(empty.err).toMatch(/registry\.json/)
    expect((await run('export', '--library', best, '--out', join(outDir, 'x.json'), '--backend', 'openai')).code).toBe(
      2,
    )
    expect((await run('export', '--library', best, '--out', join(outDir, 'x.json'), '--temperature', '9')).code).toBe(2)
  })
})
