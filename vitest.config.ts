import { defineConfig } from 'vitest/config'

/** `npm test` runs all three projects: Worker tests in workerd, Node unit tests, and end-to-end tests. */
export default defineConfig({
  test: {
    projects: ['./tests/workers/vitest.config.ts', './tests/offline/vitest.config.ts', './tests/e2e/vitest.config.ts'],
  },
})
