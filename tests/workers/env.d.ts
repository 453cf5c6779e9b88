import type { D1Migration } from 'cloudflare:test'

declare global {
  namespace Cloudflare {
    interface Env {
      TEST_MIGRATIONS: D1Migration[]
      /** The step model test's runs, seed and path (`npm run test:model -- --runs N --seed S --path P`). */
      MODEL_RUNS: string
      MODEL_SEED: string
      MODEL_PATH: string
      __STRYKER_ACTIVE_MUTANT__: string
    }
  }
}
