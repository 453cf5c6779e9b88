import path from 'node:path'
import { defineConfig } from 'vitest/config'

/** Browser tests: real `wrangler dev` pages opened in Debian's headless Chromium through playwright-core. */
export default defineConfig({
  root: path.join(import.meta.dirname, '../..'),
  test: {
    name: 'browser',
    // Inside a workspace, vitest resolves a project's `include` against `test.root` (the top-level root is ignored).
    root: path.join(import.meta.dirname, '../..'),
    environment: 'node',
    include: ['tests/browser/**/*.test.ts'],
    testTimeout: 180_000,
    hookTimeout: 180_000,
    // One wrangler dev and one Chromium at a time: the machine has 2 cores.
    fileParallelism: false,
    // After the other projects (group 0), so its wrangler dev never runs beside the e2e project's.
    sequence: { groupOrder: 1 },
  },
})
