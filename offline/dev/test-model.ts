/**
 * `npm run test:model [-- --runs N --seed S --path P]`: the step protocol's model-based test
 * (`tests/workers/step-model.test.ts`) with more runs than `npm test` gives it (20), or one failing run replayed from
 * the seed and path fast-check printed. Runs in the workers pool like every Worker test.
 */
import { spawnSync } from 'node:child_process'
import { parseArgs } from 'node:util'

const { values } = parseArgs({
  options: { runs: { type: 'string', default: '200' }, seed: { type: 'string' }, path: { type: 'string' } },
})
const result = spawnSync('npx', ['vitest', 'run', '--project', 'workers', 'tests/workers/step-model.test.ts'], {
  stdio: 'inherit',
  env: {
    ...process.env,
    MODEL_RUNS: values.runs,
    ...(values.seed ? { MODEL_SEED: values.seed } : {}),
    ...(values.path ? { MODEL_PATH: values.path } : {}),
  },
})
process.exit(result.status ?? 1)
