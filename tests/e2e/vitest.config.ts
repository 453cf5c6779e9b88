import path from 'node:path'
import { defineConfig } from 'vitest/config'

export default defineConfig({
  root: path.join(import.meta.dirname, '../..'),
  test: {
    name: 'e2e',
    // Inside a workspace, vitest resolves a project's `include` against `test.root` (the top-level root is ignored).
    root: path.join(import.meta.dirname, '../..'),
    environment: 'node',
    // The CLI's build, current with the sources, for the tests that run the bin.
    globalSetup: ['tests/support/cli-build.ts'],
    include: ['tests/e2e/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // One wrangler dev at a time: the machine has 2 cores.
    fileParallelism: false,
  },
})
