import path from 'node:path'
import { defineConfig } from 'vitest/config'

export default defineConfig({
  root: path.join(import.meta.dirname, '../..'),
  test: { name: 'offline', environment: 'node', include: ['tests/offline/**/*.test.ts'] },
})
