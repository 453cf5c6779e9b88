import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { EvolveCliOptions } from '../../offline/evolve/cli.ts'

/** The evolve demo dataset (offline/evolve/fixtures). */
export const EVOLVE_FIXTURE = 'offline/evolve/fixtures/pairs-demo.json'

/**
 * `reward-harness evolve`'s options against one OpenAI-compatible endpoint, as the flags would give them, with a
 * fresh `--out` under the system's temp dir; `overrides` replace any of them.
 * @example await runEvolveCommand(await evolveAgainst(stub.baseUrl, { iterations: '2' }), () => {})
 */
export async function evolveAgainst(
  endpoint: string,
  overrides: Partial<EvolveCliOptions> = {},
): Promise<EvolveCliOptions> {
  return {
    dataset: EVOLVE_FIXTURE,
    out: await mkdtemp(join(tmpdir(), 'evolve-')),
    iterations: '1',
    backend: 'openai',
    endpoint: [endpoint],
    model: 'stub-model',
    seed: '42',
    valFraction: '0.34',
    exploreMargin: '0.1',
    pruneEvery: '0',
    locale: 'en',
    concurrency: '2',
    ...overrides,
  }
}
