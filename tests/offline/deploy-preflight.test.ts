/** `npm run deploy`'s preflight: the shipped placeholder D1 id stops a deploy with what to do; a real id passes. */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  deployProblems,
  PLACEHOLDER_DATABASE_ID,
  productionDatabaseId,
  withProductionDatabaseId,
} from '../../offline/dev/deploy-preflight.ts'

const TOML = readFileSync(join(import.meta.dirname, '../../wrangler.toml'), 'utf8')

describe('deploy preflight', () => {
  it('stops on the placeholder database_id wrangler.toml ships with, naming the commands that fix it', () => {
    expect(productionDatabaseId(TOML)).toBe(PLACEHOLDER_DATABASE_ID)
    const [problem] = deployProblems(TOML)
    expect(problem).toContain('npx wrangler d1 create reward-harness')
    expect(problem).toContain('npm run deploy:database-id -- ')
  })

  it('writes a real id into the production block only, after which nothing stops the deploy', () => {
    const id = 'c0ffee00-1111-2222-3333-444455556666'
    const patched = withProductionDatabaseId(TOML, id)
    expect(productionDatabaseId(patched)).toBe(id)
    expect(deployProblems(patched)).toEqual([])
    // The local block keeps its id; nothing else moved.
    expect(patched.split(PLACEHOLDER_DATABASE_ID)).toHaveLength(2)
    expect(patched.replace(id, PLACEHOLDER_DATABASE_ID)).toBe(TOML)
    expect(() => withProductionDatabaseId(TOML, 'not-an-id')).toThrow(/not a D1 database id/)
  })
})
