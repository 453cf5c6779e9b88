/**
 * The CLI's prebuilt bundle: `offline/cli/index.ts`, everything it imports from this repository and the pure-JavaScript
 * packages every command loads (BUNDLED_PACKAGES; the others stay in node_modules), compiled by esbuild into one
 * CommonJS file, `dist/cli/index.cjs`, so `reward-harness` starts without tsx's compile hooks, and with V8's code
 * cache (offline/cli/code-cache.js: node:vm takes a code cache for a script, not for an ES module). Modules the CLI
 * imports lazily stay lazy: esbuild runs their top level at the first `import()`. `npm ci` builds it (the `prepare`
 * script); `npm run build:cli` rebuilds it. offline/cli/bin.js runs it only while every source it was built from is
 * unchanged (same mtime and size, listed in `dist/cli/sources.json`), and the sources through tsx otherwise: an edited
 * source is never shadowed by a stale bundle, it only starts slower until the next build.
 */
import { mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { build, type Metafile, type Plugin } from 'esbuild'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
/** Where bin.js looks for the bundle (its entry `index.cjs` and `sources.json`). */
export const CLI_BUNDLE_DIR = join(ROOT, 'dist/cli')
/**
 * Files that shape the build without being imported: a change to them makes the bundle stale too. The lockfile stands
 * for the packages compiled into the bundle (BUNDLED_PACKAGES): an install that changes one changes it.
 */
const BUILD_INPUTS = ['offline/cli/bundle.ts', 'tsconfig.json', 'package.json', 'package-lock.json']

/** What `sources.json` records per source file (paths relative to the repository root). */
export type BundleSources = Record<string, { mtimeMs: number; size: number }>

/**
 * Keeps `import.meta.url` meaning the source file's own URL inside the bundle (the CLI finds the repository root,
 * its migrations and its prompts from it): the URL is rebuilt from the bundle's own folder (`__dirname`, which sits
 * in `outdir`) and the source's path relative to it. `import.meta.dirname`/`filename` have no such rewrite: the build
 * refuses them.
 */
function sourceUrls(outdir: string): Plugin {
  return {
    name: 'source-import-meta-url',
    setup(builder) {
      builder.onLoad({ filter: /\.ts$/ }, (args) => {
        const text = readFileSync(args.path, 'utf8')
        if (/import\.meta\.(dirname|filename)\b/.test(text)) {
          return { errors: [{ text: `${relative(ROOT, args.path)}: use import.meta.url (the bundle rewrites it)` }] }
        }
        const fromBundle = relative(outdir, args.path).split('\\').join('/')
        const path = `require('node:path').join(__dirname, ${JSON.stringify(fromBundle)})`
        const url = `require('node:url').pathToFileURL(${path}).href`
        return { contents: text.replaceAll(/\bimport\.meta\.url\b/g, url), loader: 'ts' }
      })
    },
  }
}

/**
 * Dependencies compiled into the bundle, and so into its code cache: each package left in node_modules costs a
 * resolve, a read and a compile at every start (zod's ~95 files, commander's 7). Packages with a native addon, or that
 * find files beside their own, stay out.
 */
const BUNDLED_PACKAGES = new RegExp(
  `^(${[
    ...['zod', 'jsonrepair', 'simple-statistics', 'd3-array', 'lru-cache', 're2js', 'commander'],
    ...['p-limit', 'yocto-queue', 'p-retry', 'is-network-error', 'retry'],
    ...['write-file-atomic', 'signal-exit', 'imurmurhash'],
  ].join('|')})(/|$)`,
)

/** Every other bare import stays in node_modules (native addons, packages that find files beside their own). */
function dependenciesExternal(): Plugin {
  return {
    name: 'dependencies-external',
    setup(builder) {
      builder.onResolve({ filter: /^[^./]/ }, (args) =>
        BUNDLED_PACKAGES.test(args.path) ? undefined : { path: args.path, external: true },
      )
    },
  }
}

/**
 * Fails the build on an `import()` left in the bundle (one of a module esbuild does not bundle: a `node:` builtin or a
 * package outside BUNDLED_PACKAGES). Under Node 20, code compiled from a V8 code cache through `node:vm` has no
 * dynamic-import callback: such an `import()` would work on a command's first run and throw on every later one.
 * @example refuseDynamicImports(result.metafile) // throws on `await import('node:path')` in a CLI module
 * @internal
 */
export function refuseDynamicImports(metafile: Metafile): void {
  const dynamic = Object.values(metafile.outputs).flatMap((output) =>
    output.imports.filter((entry) => entry.kind === 'dynamic-import').map((entry) => entry.path),
  )
  if (dynamic.length > 0)
    throw new Error(`the CLI bundle keeps import() of ${dynamic.join(', ')}: import them statically instead`)
}

/**
 * Builds the bundle into a fresh folder and swaps it in, so a CLI started meanwhile sees the old bundle or none (and
 * runs the sources), never a half-written one. Returns the sources it was built from.
 * @example await buildCliBundle() // dist/cli/index.cjs and dist/cli/sources.json
 */
export async function buildCliBundle(outdir: string = CLI_BUNDLE_DIR): Promise<BundleSources> {
  const staging = `${outdir}.${process.pid}.tmp`
  rmSync(staging, { recursive: true, force: true })
  // The same folder depth as the final one: URLs in the bundle are relative to it.
  mkdirSync(dirname(staging), { recursive: true })
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: ['offline/cli/index.ts'],
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    plugins: [sourceUrls(outdir), dependenciesExternal()],
    outdir: staging,
    outExtension: { '.js': '.cjs' },
    metafile: true,
    logLevel: 'warning',
  })
  refuseDynamicImports(result.metafile)
  const sources: BundleSources = {}
  const ownInputs = Object.keys(result.metafile.inputs).filter((path) => !path.startsWith('node_modules/'))
  for (const path of [...ownInputs, ...BUILD_INPUTS]) {
    const { mtimeMs, size } = statSync(resolve(ROOT, path))
    sources[path] = { mtimeMs, size }
  }
  const root = `${relative(outdir, ROOT).split('\\').join('/')}/`
  writeFileSync(join(staging, 'sources.json'), `${JSON.stringify({ root, sources }, null, 1)}\n`)
  const old = `${outdir}.${process.pid}.old`
  try {
    renameSync(outdir, old)
  } catch {
    // No earlier bundle.
  }
  renameSync(staging, outdir)
  rmSync(old, { recursive: true, force: true })
  return sources
}

if (process.argv[1] && pathToFileURL(process.argv[1]).href === import.meta.url) {
  const sources = await buildCliBundle()
  console.log(`dist/cli: the CLI bundled from ${Object.keys(sources).length} files`)
}
