#!/usr/bin/env node
// The `reward-harness` command (package.json "bin"). Runs the prebuilt bundle (offline/cli/bundle.ts, built by
// `npm ci`) with V8's code cache while it is up to date with the sources; otherwise loads tsx's ESM hooks into this
// process and runs the TypeScript CLI (offline/cli/index.ts) itself. Usage: `npx reward-harness --help`.
import { codeCacheFile, loadWithCodeCache } from './code-cache.js'
import { freshBundleEntry } from './fresh-bundle.js'

const argv = process.argv.slice(2)
const bundle = freshBundleEntry(new URL('../../dist/cli/', import.meta.url))
if (bundle) {
  const cli = loadWithCodeCache(bundle, codeCacheFile(bundle, argv))
  process.exitCode = await cli.exports.main(argv)
  cli.save()
} else {
  const { main } = await importSources()
  process.exitCode = await main(argv)
}

async function importSources() {
  // Plain JavaScript packages every command needs load before the hooks exist: through tsx's hooks each of zod's ~100
  // files would cost a round trip to the hooks thread.
  await Promise.all([import('zod'), import('commander')])
  const { register } = await import('tsx/esm/api')
  register()
  return import('./index.ts')
}
