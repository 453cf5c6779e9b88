import path from 'node:path'
import { defineConfig } from 'vitest/config'

export default defineConfig({
  root: path.join(import.meta.dirname, '../..'),
  test: {
    name: 'offline',
    root: path.join(import.meta.dirname, '../..'),
    environment: 'node',
    // The CLI's build, current with the sources, for the tests that run the bin.
    globalSetup: ['tests/support/cli-build.ts'],
    include: ['tests/offline/**/*.test.ts'],
  },
})
