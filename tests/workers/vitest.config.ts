import path from 'node:path'
import { cloudflareTest, readD1Migrations } from '@cloudflare/vitest-pool-workers'
import { defineConfig } from 'vitest/config'

const root = path.join(import.meta.dirname, '../..')

export default defineConfig(async () => {
  const migrations = await readD1Migrations(path.join(root, 'migrations'))
  return {
    root,
    plugins: [
      cloudflareTest({
        main: './workers/index.ts',
        wrangler: { configPath: './wrangler.toml' },
        remoteBindings: false,
        miniflare: {
          bindings: { TEST_MIGRATIONS: migrations, ADMIN_TOKEN: 'test-admin-token', DEPLOYMENT: 'local', QUEUE_RETRY_BASE_S: '0' },
        },
      }),
    ],
    test: {
      name: 'workers',
      root,
      include: ['tests/workers/**/*.test.ts'],
      setupFiles: ['./tests/workers/apply-migrations.ts'],
      testTimeout: 60_000,
    },
  }
})
