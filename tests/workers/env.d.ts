import type { D1Migration } from 'cloudflare:test'
import type { Env as WorkerEnv } from '../../workers/env.ts'

declare global {
  namespace Cloudflare {
    interface GlobalProps {
      mainModule: typeof import('../../workers/index.ts')
    }
    interface Env extends WorkerEnv {
      TEST_MIGRATIONS: D1Migration[]
    }
  }
}
