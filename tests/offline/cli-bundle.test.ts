/**
 * The CLI's prebuilt bundle (offline/cli/bundle.ts) and the check bin.js makes before running it
 * (offline/cli/fresh-bundle.js): built into a temporary folder, so the repository's own dist/cli is left alone.
 */
import { execFile } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type BundleSources, buildCliBundle, refuseDynamicImports } from '../../offline/cli/bundle.ts'
import { codeCacheFile } from '../../offline/cli/code-cache.js'
import { freshBundleEntry } from '../../offline/cli/fresh-bundle.js'

const ROOT = join(import.meta.dirname, '../..')

/** Runs `main(argv)` of the bundle at `entry` in a child node (no tsx), from the repository root. */
function runBundle(entry: URL, argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const script =
    `const { main } = await import(${JSON.stringify(entry.href)}); ` +
    `process.exitCode = await main(${JSON.stringify(argv)})`
  return new Promise((resolve) => {
    execFile(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT }, (error, out, err) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, out, err }),
    )
  })
}

/** Runs the bundle at `entry` as bin.js does (offline/cli/code-cache.js); says whether a code cache was used. */
function runWithCodeCache(entry: URL, argv: string[]): Promise<{ code: number; out: string; cached: boolean }> {
  const loader = pathToFileURL(join(ROOT, 'offline/cli/code-cache.js')).href
  const script =
    `const { codeCacheFile, loadWithCodeCache } = await import(${JSON.stringify(loader)}); ` +
    `const entry = new URL(${JSON.stringify(entry.href)}); const argv = ${JSON.stringify(argv)}; ` +
    'const cli = loadWithCodeCache(entry, codeCacheFile(entry, argv)); ' +
    'process.exitCode = await cli.exports.main(argv); cli.save(); process.stderr.write(String(cli.cached))'
  return new Promise((resolve) => {
    execFile(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT }, (error, out, err) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, out, cached: err.endsWith('true') }),
    )
  })
}

describe('the CLI bundle', () => {
  const directory = mkdtempSync(join(tmpdir(), 'cli-bundle-'))
  const outdir = join(directory, 'bundle', 'cli')
  const bundleDir = pathToFileURL(`${outdir}/`)
  let sources: BundleSources
  beforeAll(async () => {
    // The bundle leaves its dependencies to node_modules, found from where it lies.
    symlinkSync(join(ROOT, 'node_modules'), join(directory, 'node_modules'), 'dir')
    sources = await buildCliBundle(outdir)
  }, 60_000)
  afterAll(() => rmSync(directory, { recursive: true, force: true }))

  /** Rewrites the recorded sources, as if the bundle had been built from other files. */
  function recordSources(edit: (recorded: BundleSources) => void): void {
    const file = join(outdir, 'sources.json')
    const manifest = JSON.parse(readFileSync(file, 'utf8')) as { root: string; sources: BundleSources }
    const recorded = structuredClone(sources)
    edit(recorded)
    writeFileSync(file, JSON.stringify({ ...manifest, sources: recorded }))
  }

  it('records every source it was built from, the build recipe included', () => {
    expect(Object.keys(sources)).toEqual(
      expect.arrayContaining([
        'offline/cli/index.ts',
        'offline/cli/commands/search.ts',
        'offline/search/run.ts',
        'offline/cli/bundle.ts',
        'tsconfig.json',
      ]),
    )
    expect(Object.keys(sources).some((path) => path.includes('node_modules'))).toBe(false)
  })

  it('runs a command the way the sources do, and finds the repository from where its sources are', async () => {
    recordSources(() => {})
    const entry = freshBundleEntry(bundleDir)
    expect(entry?.href).toBe(new URL('index.cjs', bundleDir).href)
    const output = join(directory, 'search', 'best.json')
    const args = ['search', '--dataset', 'examples/demo.json', '--backend', 'mock', '--output', output, '--json']
    const result = await runBundle(entry!, args)
    expect(result).toMatchObject({ code: 0, err: '' })
    const summary = JSON.parse(result.out) as { status: string; run_records: { replay: string } }
    expect(summary.status).toBe('completed')
    // The replay script changes to the repository root (import.meta.url of offline/search/records.ts), not dist/.
    expect(readFileSync(summary.run_records.replay, 'utf8')).toContain(`\ncd ${ROOT}\n`)
  }, 60_000)

  it('is not run once a source differs from what it was built from, or is gone', () => {
    recordSources((recorded) => {
      recorded['offline/search/run.ts']!.mtimeMs -= 1
    })
    expect(freshBundleEntry(bundleDir)).toBeUndefined()
    recordSources((recorded) => {
      recorded['offline/cli/program.ts']!.size += 1
    })
    expect(freshBundleEntry(bundleDir)).toBeUndefined()
    recordSources((recorded) => {
      recorded['offline/cli/no-such-file.ts'] = { mtimeMs: 0, size: 0 }
    })
    expect(freshBundleEntry(bundleDir)).toBeUndefined()
    rmSync(join(outdir, 'sources.json'))
    expect(freshBundleEntry(bundleDir)).toBeUndefined()
  })

  it("runs with the code cache its command's first run made, and makes it again when V8 refuses it", async () => {
    const entry = new URL('index.cjs', bundleDir)
    const argv = ['search', '--help']
    const cacheFile = codeCacheFile(entry, argv)
    rmSync(cacheFile, { force: true })
    const first = await runWithCodeCache(entry, argv)
    expect(first).toMatchObject({ code: 0, cached: false })
    expect(existsSync(cacheFile)).toBe(true)
    const second = await runWithCodeCache(entry, argv)
    expect(second).toEqual({ ...first, cached: true })
    writeFileSync(cacheFile, 'not a code cache')
    expect(await runWithCodeCache(entry, argv)).toEqual({ ...first, cached: false })
    expect(await runWithCodeCache(entry, argv)).toEqual({ ...first, cached: true })
  }, 60_000)

  it('keeps one code cache per command inside its own folder, whatever the arguments say', () => {
    const entry = new URL('index.cjs', bundleDir)
    const folder = join(outdir, 'code-cache')
    expect(codeCacheFile(entry, ['search', '--dataset', 'x.json'])).toBe(join(folder, 'search.bin'))
    expect(codeCacheFile(entry, ['search', '--help'])).toBe(join(folder, 'search-help.bin'))
    expect(codeCacheFile(entry, [])).toBe(join(folder, 'none-help.bin'))
    expect(codeCacheFile(entry, ['../../etc/passwd'])).toBe(join(folder, 'other.bin'))
  })

  it('refuses to build a bundle that keeps an import(): code run from a code cache cannot import', () => {
    const output = (kind: 'dynamic-import' | 'require-call') => ({
      outputs: { 'index.cjs': { imports: [{ path: 'node:fs/promises', kind, external: true }] } },
    })
    expect(() => refuseDynamicImports(output('dynamic-import') as never)).toThrow(/import\(\) of node:fs\/promises/)
    expect(() => refuseDynamicImports(output('require-call') as never)).not.toThrow()
  })
})
