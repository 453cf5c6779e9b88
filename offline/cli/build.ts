/**
 * Builds the CLI that the `reward-harness` bin runs: `offline/cli/main.ts`, our code and the pure-JavaScript
 * packages every command loads, compiled by esbuild into ES modules in `dist/cli/` (`main.js` and the chunks that
 * commands load when they run), with `build.json` recording what it was built from (./build-record.ts). npm's
 * `prepack` builds it for the package; in a clone, the `dependencies` script after `npm install` or `npm ci` changed
 * node_modules (not `prepare`: npm 11 lists a tarball's `prepare` among the install scripts a user must approve,
 * though it never runs it there), and `npm run build:cli` by hand. `--if-stale` builds only when the record no longer
 * matches the sources.
 */
import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build, type Plugin } from 'esbuild'
import { BUILD_RECORD, namePaths, recordInputs, staleInputs } from './build-record.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
/** Where the bin looks for the build. */
export const CLI_BUILD_DIR = join(ROOT, 'dist/cli')
/**
 * Files that shape the build without being imported: a change to them makes the build stale too. The lockfile stands
 * for the packages compiled in (BUNDLED_PACKAGES): an install that changes one changes it.
 */
const BUILD_INPUTS = ['offline/cli/build.ts', 'tsconfig.json', 'package.json', 'package-lock.json']

/**
 * Dependencies compiled into the build: each package left in node_modules costs a resolve and a read of every file
 * at each start (zod's ~95 files, commander's 7). Packages with a native addon, or that find files beside their own,
 * stay out.
 */
const BUNDLED_PACKAGES = new RegExp(
  `^(${[
    ...['zod', 'jsonrepair', 'simple-statistics', 'd3-array', 'lru-cache', 're2js', 'commander'],
    ...['p-limit', 'yocto-queue', 'p-retry', 'is-network-error', 'retry'],
    ...['write-file-atomic', 'signal-exit', 'imurmurhash'],
  ].join('|')})(/|$)`,
)

/**
 * CommonJS packages compiled into an ES module still call `require()` for Node's built-ins and read `__filename`
 * (write-file-atomic names its temporary files with it): each output file gets its own, made from its URL.
 */
const COMMONJS_BANNER = [
  "import { createRequire as __rhRequire } from 'node:module'",
  "import { fileURLToPath as __rhPath } from 'node:url'",
  'const require = __rhRequire(import.meta.url)',
  'const __filename = __rhPath(import.meta.url)',
].join('; ')

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
 * Builds into a fresh folder beside `outdir` and swaps it in, so a CLI started meanwhile sees the old build or the
 * new one, never half of one. `outdir` must sit two folders below the repository root, as `offline/<x>/` does: code
 * finds the root, its migrations and `.dev.vars` from `import.meta.url`. Returns the inputs it recorded.
 * @example await buildCli() // dist/cli/main.js, its chunks and dist/cli/build.json
 */
export async function buildCli(outdir: string = CLI_BUILD_DIR): Promise<string[]> {
  const staging = `${outdir}.${process.pid}.tmp`
  rmSync(staging, { recursive: true, force: true })
  mkdirSync(dirname(staging), { recursive: true })
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: { main: 'offline/cli/main.ts' },
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    // Node 20 still runs it (CI checks that on the machine's Node); engines names the supported lines.
    target: 'node20.19',
    banner: { js: COMMONJS_BANNER },
    plugins: [dependenciesExternal()],
    outdir: staging,
    metafile: true,
    logLevel: 'warning',
  })
  // A package's path may lead out of the root where node_modules is a link (`../main/node_modules/zod/…`).
  const own = Object.keys(result.metafile.inputs).filter((path) => !path.split('/').includes('node_modules'))
  const inputs = [...new Set([...own, ...BUILD_INPUTS])]
  writeFileSync(join(staging, BUILD_RECORD), `${JSON.stringify(recordInputs(ROOT, inputs), null, 1)}\n`)
  const old = `${outdir}.${process.pid}.old`
  try {
    renameSync(outdir, old)
  } catch {
    // No earlier build.
  }
  renameSync(staging, outdir)
  rmSync(old, { recursive: true, force: true })
  return inputs
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const stale = staleInputs(ROOT, CLI_BUILD_DIR)
  if (process.argv.includes('--if-stale') && stale.length === 0) {
    console.log('dist/cli: up to date')
  } else {
    const inputs = await buildCli()
    const why = stale.length > 0 && stale[0] !== BUILD_RECORD ? ` (${namePaths(stale)} changed)` : ''
    console.log(`dist/cli: the CLI built from ${inputs.length} files${why}`)
  }
}
