#!/usr/bin/env node
// The `reward-harness` command (package.json "bin"): loads tsx's ESM hooks into this process, then runs
// the TypeScript CLI (offline/cli/index.ts). Usage: `npx reward-harness --help`.
import { register } from 'tsx/esm/api'

// Plain JavaScript packages every command needs load before the hooks exist: through tsx's hooks each of zod's ~100
// files would cost a round trip to the hooks thread (about half of `--help`'s CPU).
await Promise.all([import('zod'), import('commander')])
register()
const { main } = await import('./index.ts')
process.exitCode = await main(process.argv.slice(2))
