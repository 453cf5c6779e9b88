/**
 * The CLI and credentials (issue 39 item 5): it refuses to send the admin token over plain http:// to a host that is
 * not this machine unless `--allow-insecure-http` says so, and what it prints or writes of a URL carries no
 * credential (`export --llm-base-url`, a failure such as `search --base-url`'s).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { reportFailure } from '../../offline/cli/failures.ts'
import { autosrFixture } from '../support/autosr-fixture.ts'
import { runCli } from '../support/cli.ts'

const SK = 'sk-planted0123456789abcdef'
const CREDENTIALED_URL = `http://user:${SK}@judge.example:8000/v1?key=${SK}&mode=fast`

let work: string
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'rh-cli-credentials-'))
})
afterAll(() => rmSync(work, { recursive: true, force: true }))

describe('the admin token over plain http', () => {
  it('an admin command to http:// on another host exits 2 before sending, naming https:// and the flag', async () => {
    const env = { REWARD_HARNESS_ADMIN_TOKEN: 'admin-token-never-sent' }
    const refused = await runCliWithEnv(env, 'rollback', '--target', 't', '--url', 'http://rm.example.invalid')
    expect(refused.code).toBe(2)
    expect(refused.err).toMatch(/refusing to send the admin token over plain http:\/\/ to rm\.example\.invalid/)
    expect(refused.err).toContain('--allow-insecure-http')
    // With the flag it goes ahead (and fails to connect: nothing answers there).
    const allowed = await runCliWithEnv(
      env,
      'rollback',
      '--target',
      't',
      '--url',
      'http://rm.example.invalid',
      '--allow-insecure-http',
    )
    expect(allowed.err).not.toContain('refusing to send the admin token')
    // Loopback and https:// need no flag.
    const local = await runCliWithEnv(env, 'rollback', '--target', 't', '--url', 'http://127.0.0.1:9')
    expect(local.err).not.toContain('refusing to send the admin token')
  })

  it('a run token (distill --url) and an RM token (bench url:) are held to the same rule', async () => {
    const distill = await runCliWithEnv(
      { REWARD_HARNESS_TOKEN: 'run-token-never-sent' },
      ...['distill', '--url', 'http://rm.example.invalid', '--run-id', 'r', '--out', join(work, 'distill')],
    )
    expect(distill.code).toBe(2)
    expect(distill.err).toMatch(/refusing to send a token over plain http:\/\/ to rm\.example\.invalid/)
    const bench = await runCliWithEnv(
      { RM_TOKEN: 'rm-token-never-sent' },
      ...['bench', '--dataset', 'examples/demo.json', '--scorer', 'url:http://rm.example.invalid#t'],
    )
    expect(bench.code).toBe(2)
    expect(bench.err).toMatch(/refusing to send the RM token over plain http:\/\/ to rm\.example\.invalid/)
  })
})

describe('URL credentials in what the CLI prints or writes', () => {
  it('export --llm-base-url writes and prints the URL without its credentials', async () => {
    const source = join(work, 'autosr.json')
    writeFileSync(source, JSON.stringify(autosrFixture()))
    const artifact = join(work, 'rm.json')
    expect((await runCli('import', '--from', 'autosr', source, '--out', artifact)).code).toBe(0)
    const out = join(work, 'rm-autosr.json')
    const exported = await runCli(
      'export',
      '--artifact',
      artifact,
      '--format',
      'autosr',
      '--out',
      out,
      '--llm-base-url',
      CREDENTIALED_URL,
      '--llm-model',
      'qwen/qwen3-8b',
    )
    expect(exported.code, exported.err).toBe(0)
    const written = readFileSync(out, 'utf8')
    for (const text of [exported.out, exported.err, written]) {
      expect(text).not.toContain(SK)
      expect(text).not.toContain('user:')
    }
    expect(JSON.parse(written).runtime_snapshot.llm.base_url).toBe('http://judge.example:8000/v1?mode=fast')
  })

  it('a failure that quotes a URL (search --base-url) prints it redacted, in text and in JSON', () => {
    const error = new Error(`search failed: no healthy endpoint for 60 s (${CREDENTIALED_URL} probe: refused)`)
    for (const json of [false, true]) {
      let printed = ''
      reportFailure(error, (text) => (printed += text), json)
      expect(printed).not.toContain(SK)
      expect(printed).toContain('judge.example:8000/v1')
    }
  })
})

/** runCli with extra environment variables for the child. */
async function runCliWithEnv(env: Record<string, string>, ...argv: string[]) {
  const saved = Object.fromEntries(Object.keys(env).map((key) => [key, process.env[key]]))
  Object.assign(process.env, env)
  try {
    return await runCli(...argv)
  } finally {
    for (const [key, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[key]
      else process.env[key] = value
    }
  }
}
