/**
 * The CLI's build (offline/cli/build.ts), the record of what it was built from (offline/cli/build-record.ts), and
 * what the built entry (offline/cli/main.ts) does with it: in a copy of the clone, a stale build is rebuilt and named;
 * in a package's layout (the bin, dist/cli, migrations, no sources) it runs on plain node from any folder.
 */
import { execFile } from 'node:child_process'
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type BuildRecord, recordInputs, staleInputs } from '../../offline/cli/build-record.ts'

const ROOT = join(import.meta.dirname, '../..')

interface Run {
  code: number
  out: string
  err: string
}

/** Runs `node …args` from `cwd`, with `nodeOptions` in NODE_OPTIONS. */
function node(args: string[], cwd: string, nodeOptions = ''): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      args,
      { cwd, env: { ...process.env, NO_COLOR: '1', NODE_OPTIONS: nodeOptions } },
      (error, out, err) => resolve({ code: error ? Number(error.code ?? 1) : 0, out, err }),
    )
  })
}

describe('the build record', () => {
  const root = mkdtempSync(join(tmpdir(), 'cli-build-record-'))
  const buildDir = join(root, 'dist/cli')
  afterAll(() => rmSync(root, { recursive: true, force: true }))

  /** Writes `files` under the root and records them as a build would. */
  function built(files: Record<string, string>): void {
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(root, path)), { recursive: true })
      writeFileSync(join(root, path), text)
    }
    mkdirSync(buildDir, { recursive: true })
    writeFileSync(join(buildDir, 'build.json'), JSON.stringify(recordInputs(root, Object.keys(files))))
  }

  it('finds nothing stale until a content changes: a touch or a reverted edit is no change', () => {
    built({ 'a.ts': 'export const a = 1\n', 'b/c.ts': 'export const c = 2\n' })
    expect(staleInputs(root, buildDir)).toEqual([])
    const later = new Date(Date.now() + 60_000)
    utimesSync(join(root, 'a.ts'), later, later)
    expect(staleInputs(root, buildDir)).toEqual([])
    writeFileSync(join(root, 'b/c.ts'), 'export const c = 3\n')
    expect(staleInputs(root, buildDir)).toEqual(['b/c.ts'])
    writeFileSync(join(root, 'b/c.ts'), 'export const c = 2\n')
    expect(staleInputs(root, buildDir)).toEqual([])
  })

  it('sees a same-size edit that kept the old mtime, as `cp -p` and `rsync -a` copy one', () => {
    built({ 'a.ts': 'export const a = 1\n' })
    const { atime, mtime } = statSync(join(root, 'a.ts'))
    writeFileSync(join(root, 'a.ts'), 'export const a = 9\n')
    utimesSync(join(root, 'a.ts'), atime, mtime)
    expect(staleInputs(root, buildDir)).toEqual(['a.ts'])
  })

  it('names a missing input, and a build without a record', () => {
    built({ 'a.ts': 'x\n', 'gone.ts': 'y\n' })
    rmSync(join(root, 'gone.ts'))
    expect(staleInputs(root, buildDir)).toEqual(['gone.ts'])
    rmSync(join(buildDir, 'build.json'))
    expect(staleInputs(root, buildDir)).toEqual(['build.json'])
  })
})

describe('the built CLI', () => {
  const work = mkdtempSync(join(tmpdir(), 'cli-build-'))
  // A copy of the clone (every input of the build, the bin) and a package's layout made from its build.
  const clone = join(work, 'clone')
  const installed = join(work, 'lib/node_modules/reward-harness')
  const elsewhere = join(work, 'elsewhere')

  beforeAll(async () => {
    const record = JSON.parse(readFileSync(join(ROOT, 'dist/cli/build.json'), 'utf8')) as BuildRecord
    for (const path of [...Object.keys(record.inputs), 'reward-harness']) {
      cpSync(join(ROOT, path), join(clone, path))
    }
    symlinkSync(join(ROOT, 'node_modules'), join(clone, 'node_modules'), 'dir')
    const build = await node(['--import', 'tsx', 'offline/cli/build.ts'], clone)
    expect(build).toMatchObject({ code: 0, out: expect.stringMatching(/^dist\/cli: the CLI built from \d+ files/) })

    mkdirSync(join(installed, 'dist/cli'), { recursive: true })
    cpSync(join(clone, 'reward-harness'), join(installed, 'reward-harness'))
    for (const file of readdirSync(join(clone, 'dist/cli')).filter((name) => name.endsWith('.js'))) {
      cpSync(join(clone, 'dist/cli', file), join(installed, 'dist/cli', file))
    }
    cpSync(join(ROOT, 'migrations'), join(installed, 'migrations'), { recursive: true })
    symlinkSync(join(ROOT, 'node_modules'), join(installed, 'node_modules'), 'dir')
    mkdirSync(elsewhere)
  }, 120_000)
  afterAll(() => rmSync(work, { recursive: true, force: true }))

  it("records its own sources and the build's recipe, no package from node_modules", () => {
    const record = JSON.parse(readFileSync(join(clone, 'dist/cli/build.json'), 'utf8')) as BuildRecord
    const inputs = Object.keys(record.inputs)
    expect(inputs).toEqual(
      expect.arrayContaining([
        'offline/cli/main.ts',
        'offline/cli/commands/search.ts',
        'offline/search/run.ts',
        'offline/cli/build.ts',
        'package.json',
      ]),
    )
    expect(inputs.some((path) => path.includes('node_modules'))).toBe(false)
  })

  it('runs every kind of command from a package layout on plain node, from a folder outside any clone', async () => {
    const bin = join(installed, 'reward-harness')
    expect(await node([bin, '--version'], elsewhere)).toEqual({ code: 0, out: '0.1.0\n', err: '' })
    const output = join(elsewhere, 'out/best.json')
    const demo = join(ROOT, 'examples/demo.json')
    const search = await node(
      [bin, 'search', '--dataset', demo, '--backend', 'mock', '--output', output, '--json'],
      elsewhere,
    )
    expect(search).toMatchObject({ code: 0, err: '' })
    const summary = JSON.parse(search.out) as { status: string; run_records: { replay: string } }
    expect(summary.status).toBe('completed')
    // The replay script runs the package's own bin, from the package's folder.
    expect(readFileSync(summary.run_records.replay, 'utf8')).toContain(`\ncd ${installed}\n`)
    // better-sqlite3 and the migrations, found beside the build.
    const lineage = await node([bin, 'lineage', 'show', 'none', '--db', join(elsewhere, 'lineage.sqlite')], elsewhere)
    expect(lineage).toMatchObject({ code: 2, err: expect.stringContaining('no training run "none" is recorded') })
  }, 60_000)

  it('rebuilds a stale build in a clone, saying why on stderr, and runs the command on the new build', async () => {
    const manifest = join(clone, 'package.json')
    writeFileSync(manifest, readFileSync(manifest, 'utf8').replace('"version": "0.1.0"', '"version": "0.1.1"'))
    expect(await node(['reward-harness', '--version'], clone)).toEqual({
      code: 0,
      out: '0.1.1\n',
      err: 'reward-harness: rebuilding dist/cli (package.json changed since it was built)\n',
    })
    expect(await node(['reward-harness', '--version'], clone)).toEqual({ code: 0, out: '0.1.1\n', err: '' })
  }, 120_000)

  it('stops with exit code 1 when the sources do not build, rather than run the old build', async () => {
    const source = join(clone, 'offline/cli/program.ts')
    const text = readFileSync(source, 'utf8')
    writeFileSync(source, `${text}\nexport const broken = (\n`)
    try {
      const run = await node(['reward-harness', '--version'], clone)
      expect(run).toMatchObject({ code: 1, out: '' })
      expect(run.err).toContain(
        'reward-harness: rebuilding dist/cli (offline/cli/program.ts changed since it was built)',
      )
      expect(run.err).toContain('reward-harness: the CLI did not build (above)')
    } finally {
      writeFileSync(source, text)
    }
  }, 120_000)

  it('lists its commands without loading zod or re2js: the root --help loads what it prints', async () => {
    // A preloaded load hook names the packages compiled into each file the CLI loads: esbuild writes a
    // `// …node_modules/<package>/<file>` line above every module it bundles. The hook runs on its own thread, whose
    // writes to stderr can be lost when the process exits first: it appends to a file, synchronously.
    const record = join(work, 'loaded-packages.txt')
    const hooks = [
      "import { appendFileSync } from 'node:fs'",
      'export async function load(url, context, next) {',
      '  const result = await next(url, context)',
      "  const lines = String(result.source ?? '').match(/^\\/\\/ \\S*node_modules\\/(@[^/]+\\/)?[^/]+/gm) ?? []",
      "  const names = lines.map((line) => line.replace(/^.*node_modules\\//, '') + '\\n').join('')",
      `  if (names) appendFileSync(${JSON.stringify(record)}, names)`,
      '  return result',
      '}',
    ]
    const preload = join(work, 'loaded-packages.mjs')
    const hooksUrl = `data:text/javascript,${encodeURIComponent(hooks.join('\n'))}`
    writeFileSync(preload, `import { register } from 'node:module'\nregister(${JSON.stringify(hooksUrl)})\n`)
    const loaded = async (...args: string[]) => {
      writeFileSync(record, '')
      const run = await node([join(installed, 'reward-harness'), ...args], elsewhere, `--import ${preload}`)
      expect(run.code, run.err).toBe(0)
      return new Set(readFileSync(record, 'utf8').split('\n').filter(Boolean))
    }
    const help = await loaded('--help')
    // The hook sees the bundled packages: commander draws the help.
    expect(help).toContain('commander')
    expect(help).not.toContain('zod')
    expect(help).not.toContain('re2js')
    // search's own help has the knob flags, read off the zod schema.
    expect(await loaded('search', '--help')).toContain('zod')
  }, 60_000)

  it("turns on Node's compile cache where Node has one (22.1 and later)", async () => {
    // This Node may predate module.enableCompileCache: a preloaded stand-in shows whether the bin calls it.
    const standIn = join(work, 'compile-cache.mjs')
    const standInText = [
      "import module from 'node:module'",
      "module.enableCompileCache = () => process.stderr.write('compile cache on\\n')",
    ]
    writeFileSync(standIn, `${standInText.join('\n')}\n`)
    const run = await node([join(installed, 'reward-harness'), '--version'], elsewhere, `--import ${standIn}`)
    expect(run).toEqual({ code: 0, out: '0.1.0\n', err: 'compile cache on\n' })
  }, 60_000)
})
