import path from 'node:path'
import { cloudflareTest, readD1Migrations } from '@cloudflare/vitest-pool-workers'
import { kCurrentWorker } from 'miniflare'
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
          // The Worker's own entrypoint, as wrangler.toml binds it (the pool renames the Worker, so by its symbol).
          serviceBindings: { JUDGE: { name: kCurrentWorker, entrypoint: 'JudgeEntrypoint' } },
          // JUDGE_KEY_NAMES lists ADMIN_TOKEN on purpose: the Worker's own secrets are refused whatever the list says.
          bindings: {
            TEST_MIGRATIONS: migrations,
            MODEL_RUNS: process.env.MODEL_RUNS ?? '',
            MODEL_SEED: process.env.MODEL_SEED ?? '',
            MODEL_PATH: process.env.MODEL_PATH ?? '',
            // Stryker's mutant switch (npm run test:mutants): the instrumented code reads it from process.env.
            __STRYKER_ACTIVE_MUTANT__: process.env.__STRYKER_ACTIVE_MUTANT__ ?? '',
            ADMIN_TOKEN: 'test-admin-token',
            DEPLOYMENT: 'local',
            QUEUE_RETRY_BASE_S: '0',
            STEP_HEARTBEAT_S: '1',
            LEDGER_REPORT_MS: '100',
            JUDGE_KEY_NAMES: 'VLLM_KEY,SCORER_KEY,ADMIN_TOKEN,TEST_JUDGE_KEY',
            TEST_JUDGE_KEY: 'sk-test-judge',
            NOT_LISTED_KEY: 'sk-not-listed',
          },
          // Limits no test reaches, so suites that fire many requests are not throttled; rate-limit.test.ts swaps in
          // the TEST_* ones (tiny, 10 s windows) to see 429s deterministically.
          ratelimits: {
            RATE_LIMITER: { simple: { limit: 1_000_000, period: 10 } },
            RATE_LIMITER_HIGH: { simple: { limit: 1_000_000, period: 10 } },
            ADMIN_RATE_LIMITER: { simple: { limit: 1_000_000, period: 10 } },
            REFUSED_CREDENTIAL_LIMITER: { simple: { limit: 1_000_000, period: 10 } },
            TEST_RATE_LIMITER: { simple: { limit: 3, period: 10 } },
            TEST_RATE_LIMITER_HIGH: { simple: { limit: 6, period: 10 } },
            TEST_ADMIN_RATE_LIMITER: { simple: { limit: 5, period: 10 } },
            TEST_REFUSED_CREDENTIAL_LIMITER: { simple: { limit: 2, period: 10 } },
          },
        },
      }),
    ],
    test: {
      name: 'workers',
      root,
      include: ['tests/workers/**/*.test.ts'],
      setupFiles: ['./tests/workers/apply-migrations.ts'],
      // One line on what workerd's log lines in a green run are.
      globalSetup: ['./tests/workers/workerd-logs.ts'],
      testTimeout: 60_000,
    },
  }
})
