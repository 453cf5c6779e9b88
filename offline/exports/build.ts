/**
 * Builds what the package exports besides its CLI: `reward-harness/client` (the TypeScript `RewardClient`) and
 * `reward-harness/schemas` (the zod schemas of every shape), as ES modules in `dist/client/` and `dist/schemas/`,
 * each with its `.d.ts` declarations, so an installed package imports them on plain Node (20 included: Node 22 and 24
 * refuse to strip types under node_modules) and type-checks in a user's TypeScript. zod stays a dependency (imported,
 * not compiled in), so a user's schemas and ours are the same zod. npm's `prepack` runs it; `npm run build:exports`
 * by hand.
 */
import { execFileSync } from 'node:child_process'
import { cpSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
/** Each export: its entry file and the folder of `dist/` it is built into. */
export const EXPORTS = { client: 'src/client/index.ts', schemas: 'src/schemas/index.ts' } as const

/**
 * The declarations of the exports' sources, emitted by tsc into `dir/types`, their import paths ending in `.js`.
 */
function emitDeclarations(dir: string): void {
  const config = join(dir, 'tsconfig.json')
  writeFileSync(
    config,
    JSON.stringify({
      extends: join(ROOT, 'tsconfig.json'),
      compilerOptions: {
        noEmit: false,
        declaration: true,
        emitDeclarationOnly: true,
        rootDir: ROOT,
        outDir: join(dir, 'types'),
        types: [],
        lib: ['ES2023', 'DOM'],
      },
      files: Object.values(EXPORTS).map((entry) => join(ROOT, entry)),
      include: [],
    }),
  )
  execFileSync(join(ROOT, 'node_modules/.bin/tsc'), ['-p', config], { stdio: 'inherit' })
  // tsc keeps the sources' `.ts` import paths in declarations: a user's TypeScript resolves `.js` ones to them.
  for (const file of readdirSync(join(dir, 'types'), { recursive: true, encoding: 'utf8' })) {
    if (!file.endsWith('.d.ts')) continue
    const path = join(dir, 'types', file)
    writeFileSync(path, readFileSync(path, 'utf8').replace(/(from\s+'\.{1,2}\/[^']*?)\.ts'/g, "$1.js'"))
  }
}

/**
 * Builds every export into a fresh `dist/<name>/` (`index.js` bundled but for its dependencies, and the declarations
 * of the sources it is built from, `index.d.ts` first).
 * @example await buildExports() // dist/client/index.js, dist/client/index.d.ts, dist/schemas/…
 */
export async function buildExports(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'rh-exports-'))
  try {
    emitDeclarations(work)
    for (const [name, entry] of Object.entries(EXPORTS)) {
      const staging = join(work, name)
      await build({
        absWorkingDir: ROOT,
        entryPoints: { index: entry },
        bundle: true,
        format: 'esm',
        platform: 'neutral',
        target: 'node20.19',
        outdir: staging,
        // The package's dependencies stay imports: installed beside it, shared with the user's own.
        packages: 'external',
        legalComments: 'none',
        logLevel: 'warning',
      })
      // Declarations mirror the source tree; the entry's folder is what `types` points at, its imports beside it.
      cpSync(join(work, 'types'), join(staging, 'types'), { recursive: true })
      writeFileSync(join(staging, 'index.d.ts'), `export * from './types/${entry.replace(/\.ts$/, '.js')}'\n`)
      const target = join(ROOT, 'dist', name)
      rmSync(target, { recursive: true, force: true })
      renameSync(staging, target)
    }
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
  for (const name of Object.keys(EXPORTS))
    console.log(`dist/${name}: ${readdirSync(join(ROOT, 'dist', name)).join(', ')}`)
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await buildExports()
