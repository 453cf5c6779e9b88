import { defineConfig } from 'vitest/config'

/**
 * `npm test` runs all four projects: Worker tests in workerd, Node unit tests, end-to-end tests, and browser tests in
 * headless Chromium.
 */
export default defineConfig({
  test: {
    projects: [
      './tests/workers/vitest.config.ts',
      './tests/offline/vitest.config.ts',
      './tests/e2e/vitest.config.ts',
      './tests/browser/vitest.config.ts',
    ],
  },
})
