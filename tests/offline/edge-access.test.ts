/**
 * How every CLI command finds the edge's admin token and says that an edge is unreachable (offline/edge), and the
 * commands that did neither before: `distill --url` to a port where nothing listens, `train show` of a run the
 * lineage database does not hold.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { freePort } from '../../offline/dev/start.ts'
import { adminTokenFor, isLoopbackUrl, requireAdminToken } from '../../offline/edge/index.ts'
import { UsageError } from '../../src/usage-error/index.ts'
import { runCli } from '../support/cli.ts'

let dir: string

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'rh-edge-'))
  writeFileSync(join(dir, '.dev.vars'), 'OTHER=1\nADMIN_TOKEN="from-dev-vars"\n')
})

afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('the admin token for an edge', () => {
  it('is the environment variable, else .dev.vars for a loopback URL only', () => {
    expect(adminTokenFor('http://127.0.0.1:8787', { REWARD_HARNESS_ADMIN_TOKEN: 'from-env' }, [dir])).toBe('from-env')
    expect(adminTokenFor('http://127.0.0.1:8787', {}, [dir])).toBe('from-dev-vars')
    expect(adminTokenFor('http://localhost:9000/', {}, [dir])).toBe('from-dev-vars')
    expect(adminTokenFor('https://rm.example.com', {}, [dir])).toBeUndefined()
    expect(adminTokenFor('http://127.0.0.1:8787', {}, [join(dir, 'missing')])).toBeUndefined()
    expect(adminTokenFor('http://127.0.0.1:8787', { REWARD_HARNESS_DEV_VARS: join(dir, '.dev.vars') }, [])).toBe(
      'from-dev-vars',
    )
    expect(
      ['http://127.0.0.1:1', 'http://127.9.9.9', 'http://[::1]:8787', 'http://localhost'].map(isLoopbackUrl),
    ).toEqual([true, true, true, true])
    expect(['https://127.0.0.1.example.com', 'http://10.0.0.1', 'not a url'].map(isLoopbackUrl)).toEqual([
      false,
      false,
      false,
    ])
  })

  it('when missing, says where it looked (loopback) or that .dev.vars is for this machine only (remote)', () => {
    const empty = join(dir, 'empty')
    expect(() => requireAdminToken('http://127.0.0.1:8787', {}, [empty])).toThrow(
      new UsageError(
        'the admin token is missing: REWARD_HARNESS_ADMIN_TOKEN is unset and no ADMIN_TOKEN is in ' +
          `${empty}/.dev.vars. Start the server once with \`npm start\` (it writes one), ` +
          'or set REWARD_HARNESS_ADMIN_TOKEN',
      ),
    )
    expect(() => requireAdminToken('https://rm.example.com', {}, [dir])).toThrow(
      /set REWARD_HARNESS_ADMIN_TOKEN to the ADMIN_TOKEN of https:\/\/rm\.example\.com \(\.dev\.vars is read for/,
    )
  })
})

describe('what the CLI says', () => {
  it('names the URL and what to do when nothing listens there (distill --url)', async () => {
    const url = `http://127.0.0.1:${await freePort()}`
    const run = await runCli('distill', '--url', url, '--run-id', 'r1', '--token', 't', '--out', join(dir, 'out'))
    expect(run.code).toBe(1)
    expect(run.err).toContain(`cannot reach the edge at ${url} (GET /runs/r1/archive: ECONNREFUSED)`)
    expect(run.err).toContain('npm start')
  })

  it('names the lineage database it read and the flags that choose another (train show, lineage show)', async () => {
    const db = join(dir, 'lineage.sqlite')
    const train = await runCli('train', 'show', 'dp-1', '--db', db)
    expect(train.code).toBe(2)
    expect(train.err).toContain(`no training run "dp-1" is recorded in the lineage database ${db}`)
    expect(train.err).toContain('--db <file>, --env-path <env file>')
    const lineage = await runCli('lineage', 'show', 'dp-1', '--db', db)
    expect(lineage.err).toContain(`in the lineage database ${db}; choose another with --db <file> or --url <edge>`)
  })
})
