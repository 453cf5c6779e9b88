#!/usr/bin/env node
// The `reward-harness` command (package.json "bin"). Runs the prebuilt bundle (offline/cli/bundle.ts, built by
// `npm ci`) while it is up to date with the sources; otherwise loads tsx's ESM hooks into this process and runs the
// TypeScript CLI (offline/cli/index.ts) itself. Usage: `npx reward-harness --help`.
import { freshBundleEntry } from './fresh-bundle.js'

const bundle = freshBundleEntry(new URL('../../dist/cli/', import.meta.url))
const { main } = bundle ? await import(bundle.href) : await importSources()
process.exitCode = await main(process.argv.slice(2))

async function importSources() {
  // Plain JavaScript packages every command needs load before the hooks exist: through tsx's hooks each of zod's ~100
  // files would cost a round trip to the hooks thread.
  await Promise.all([import('zod'), import('commander')])
  const { register } = await import('tsx/esm/api')
  register()
  return import('./index.ts')
}
