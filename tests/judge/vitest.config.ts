import path from 'node:path'
import { defineConfig } from 'vitest/config'

/**
 * `npm run test:judge`: tests against the real local judge (`npm run judge:local`), which each file starts itself. Not
 * a project of `npm test`: a judgement takes seconds to minutes on two cores, and the judge needs its install first.
 */
export default defineConfig({
  root: path.join(import.meta.dirname, '../..'),
  test: {
    name: 'judge',
    root: path.join(import.meta.dirname, '../..'),
    environment: 'node',
    include: ['tests/judge/**/*.test.ts'],
    testTimeout: 1_200_000,
    hookTimeout: 180_000,
    fileParallelism: false,
  },
})
