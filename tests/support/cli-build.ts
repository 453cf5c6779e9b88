/**
 * Vitest global setup: the tests that run the `reward-harness` bin as a child process get a build of the sources
 * they test, made once before any of them starts (the bin would otherwise rebuild it on first use, in whichever test
 * came first, with a line on its stderr).
 */
import { buildCli, CLI_BUILD_DIR } from '../../offline/cli/build.ts'
import { staleInputs } from '../../offline/cli/build-record.ts'
import { ROOT } from './child.ts'

/**
 * Builds the CLI when its build is stale.
 * @example export default defineConfig({ test: { globalSetup: ['tests/support/cli-build.ts'] } })
 */
export default async function setup(): Promise<void> {
  if (staleInputs(ROOT, CLI_BUILD_DIR).length > 0) await buildCli()
}
