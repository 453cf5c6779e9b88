/**
 * The entry of the built CLI (`dist/cli/main.js`, made by ./build.ts), which the `reward-harness` bin imports. In a
 * clone (the sources lie beside the build) it first checks the build against the sources it was made from: a stale
 * build is rebuilt, with a line on stderr saying why, and the command runs on the new one. An installed package has
 * no sources and skips the check.
 */
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { namePaths, staleInputs } from './build-record.ts'

const argv = process.argv.slice(2)
const root = fileURLToPath(new URL('../../', import.meta.url))
const buildDir = fileURLToPath(new URL('./', import.meta.url))
const stale = existsSync(join(root, 'offline/cli/main.ts')) ? staleInputs(root, buildDir) : []
const rebuilt = stale.length > 0 ? rebuild(stale) : 'current'
if (rebuilt === 'rebuilt') {
  // This process holds the old build's modules: the new build runs in a fresh one.
  const run = spawnSync(process.execPath, [...process.execArgv, process.argv[1]!, ...argv], { stdio: 'inherit' })
  process.exit(run.status ?? 1)
} else if (rebuilt === 'failed') {
  process.exit(1)
} else {
  const { main } = await import('./index.ts')
  process.exitCode = await main(argv)
}

/**
 * Rebuilds the CLI as `npm run build:cli` does (without npm's own start-up), saying why on stderr. 'stale' when the
 * clone has no dev dependencies to build with: the stale build then runs, named as such.
 * @example rebuild(['offline/search/run.ts']) // 'rebuilt', after "reward-harness: rebuilding dist/cli (…)"
 */
function rebuild(changed: readonly string[]): 'rebuilt' | 'stale' | 'failed' {
  const why =
    changed[0] === 'build.json' ? 'it has no build record' : `${namePaths(changed)} changed since it was built`
  let tsx: string
  try {
    import.meta.resolve('esbuild')
    tsx = import.meta.resolve('tsx')
  } catch {
    process.stderr.write(
      `reward-harness: dist/cli is stale (${why}) and there is no esbuild or tsx to rebuild it with (npm install, ` +
        'then npm run build:cli); running the stale build\n',
    )
    return 'stale'
  }
  process.stderr.write(`reward-harness: rebuilding dist/cli (${why})\n`)
  const built = spawnSync(process.execPath, ['--import', tsx, join(root, 'offline/cli/build.ts')], {
    cwd: root,
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  if (built.status === 0) return 'rebuilt'
  process.stderr.write('reward-harness: the CLI did not build (above): fix the sources, then npm run build:cli\n')
  return 'failed'
}
