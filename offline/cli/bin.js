#!/usr/bin/env node
// The `reward-harness` command (package.json "bin"): loads tsx's ESM hooks into this process, then runs
// the TypeScript CLI (offline/cli/index.ts). Usage: `npx reward-harness --help`.
import { register } from 'tsx/esm/api'

register()
const { main } = await import('./index.ts')
process.exitCode = await main(process.argv.slice(2))
