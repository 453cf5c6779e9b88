import path from 'node:path'
import { defineConfig } from 'vitest/config'

export default defineConfig({
  root: path.join(import.meta.dirname, '../..'),
  test: {
    name: 'offline',
    root: path.join(import.meta.dirname, '../..'),
    environment: 'node',
    include: ['tests/offline/**/*.test.ts'],
  },
})
