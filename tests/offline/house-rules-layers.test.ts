/**
 * The layering check of `npm run check` (offline/dev/house-rules.ts): `src/schemas` sits below the rest of `src/`, so
 * a schema that imports a domain module is a finding, and the leaf helpers (hash, text) sit below the schemas.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { layerViolations } from '../../offline/dev/house-rules.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

describe('layerViolations', () => {
  it('finds a schema that imports a domain module of src/', () => {
    const findings = layerViolations(
      'src/schemas/status.ts',
      "import { ANALYSIS_REASONS } from '../analysis/select.ts'",
    )
    expect(findings).toEqual([
      { file: 'src/schemas/status.ts', line: 1, message: 'imports src/analysis/select.ts, above its own layer' },
    ])
    expect(
      layerViolations('src/schemas/artifact.ts', "export { SearchRubric } from '../search/types.ts'"),
    ).toHaveLength(1)
  })

  it('lets the rest of src/ import the schemas, and the schemas the leaf helpers', () => {
    expect(
      layerViolations('src/search/types.ts', "import type { SearchRubric } from '../schemas/search-rubric.ts'"),
    ).toEqual([])
    expect(layerViolations('src/schemas/artifact.ts', "import { sha256Hex } from '../hash/index.ts'")).toEqual([])
    expect(layerViolations('src/schemas/strict.ts', "import { nearestName } from '../text/index.ts'")).toEqual([])
  })

  it('keeps the leaf helpers below the schemas, and the layers above src/ as they were', () => {
    expect(layerViolations('src/hash/index.ts', "import { Rubric } from '../schemas/rubric.ts'")).toHaveLength(1)
    expect(layerViolations('durable-objects/a.ts', "import { x } from '../workers/runs/store.ts'")).toHaveLength(1)
    expect(layerViolations('workers/a.ts', "import { x } from '../durable-objects/names.ts'")).toEqual([])
  })

  it('finds no schema in this tree that imports from src/ outside src/schemas and the leaf helpers', () => {
    const schemas = execFileSync('git', ['ls-files', 'src/schemas'], { cwd: ROOT, encoding: 'utf8' })
      .split('\n')
      .filter((file) => file.endsWith('.ts'))
    expect(schemas.length).toBeGreaterThan(10)
    const findings = schemas.flatMap((file) => layerViolations(file, readFileSync(`${ROOT}/${file}`, 'utf8')))
    expect(findings).toEqual([])
  })
})
