/**
 * Files someone else wrote, read by the CLI: an autosr artifact whose extraction pattern backtracks exponentially in
 * JavaScript's engine (`^(a+)+$` against 10,000 `a`s and a `!`) runs in linear time in search extraction and in
 * `bench`; a pattern that needs backtracking is refused naming the field and the feature. Every path that could run
 * the pattern forever runs in a child process with a timeout, so the test fails (never hangs) where the pattern would
 * stall.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { readDeployableArtifact } from '../../offline/artifacts/autosr-import.ts'
import { ArtifactInputError } from '../../offline/artifacts/errors.ts'
import { isCredentialName, looksLikeCredential, withoutCredentials } from '../../src/credentials/index.ts'
import { MAX_JSON_DEPTH } from '../../src/json-hazard/index.ts'
import { artifactId, type RmArtifact, verifyArtifactId } from '../../src/schemas/artifact.ts'
import { linearPatternProblem } from '../../src/schemas/extraction.ts'
import { parseExtraction } from '../../src/search/roles/extraction.ts'
import { autosrFixture } from '../support/autosr-fixture.ts'
import { runChild, runRewardHarness } from '../support/child.ts'
import { runCli } from '../support/cli.ts'

/** The pattern of the issue: nested repetition, exponential in a backtracking engine on a near miss. */
const REDOS_PATTERN = '^(a+)+$'
const NEAR_MISS = `${'a'.repeat(10_000)}!`
/** A bound for a child that must finish: its start on a busy 2-core machine, not the pattern, takes the time. */
const CHILD_TIMEOUT_MS = 30_000
/** The test's own bound: past the child's, so a stalled child fails the test with its own exit, not a test timeout. */
const TEST_TIMEOUT_MS = 2 * CHILD_TIMEOUT_MS

let work: string
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'rh-hostile-'))
})
afterAll(() => rmSync(work, { recursive: true, force: true }))

function writeJson(name: string, document: unknown): string {
  const file = join(work, name)
  writeFileSync(file, `${JSON.stringify(document, null, 2)}\n`)
  return file
}

/** A two-candidate dataset whose one prompt is the near miss, under the fixture's prompt id. */
function nearMissDataset(): string {
  return writeJson('near-miss.json', {
    prompts: [
      {
        prompt_id: 'p_trains',
        prompt: NEAR_MISS,
        candidates: [
          { candidate_id: 'good', text: 'First the trains meet; second, at speed 60.', label: { rank: 1 } },
          { candidate_id: 'bad', text: 'No idea.', label: { rank: 2 } },
        ],
      },
    ],
  })
}

describe('patterns from files we did not write', () => {
  it(
    'search extraction runs ^(a+)+$ on 10,000 a and a ! in under a second',
    async () => {
      const script = `
      import { extractRegex } from './src/search/roles/extraction.ts'
      const text = 'a'.repeat(10_000) + '!'
      const started = performance.now()
      const kept = extractRegex(text, ${JSON.stringify(REDOS_PATTERN)})
      console.log(JSON.stringify({ ms: performance.now() - started, unchanged: kept === text }))`
      const child = await runChild(
        process.execPath,
        ['--import', 'tsx', '--input-type=module', '-e', script],
        {},
        CHILD_TIMEOUT_MS,
      )
      expect(child.code, child.err).toBe(0)
      const { ms, unchanged } = JSON.parse(child.out) as { ms: number; unchanged: boolean }
      expect(unchanged).toBe(true)
      expect(ms).toBeLessThan(1_000)
    },
    TEST_TIMEOUT_MS,
  )

  it(
    'an imported autosr artifact with that pattern scores the near miss in offline bench',
    async () => {
      const fixture = autosrFixture()
      fixture.runtime_snapshot.extraction = { strategy: 'regex', tag_name: 'content', pattern: REDOS_PATTERN }
      const artifact = join(work, 'redos-rm.json')
      const imported = await runCli(
        'import',
        '--from',
        'autosr',
        writeJson('redos-autosr.json', fixture),
        '--out',
        artifact,
      )
      expect(imported.code, imported.err).toBe(0)
      const bench = await runRewardHarness(
        ['bench', '--dataset', nearMissDataset(), '--scorer', `artifact:${artifact}`, '--json'],
        {},
        CHILD_TIMEOUT_MS,
      )
      expect(bench.code, bench.err).toBe(0)
      expect(JSON.parse(bench.out).failures.count).toBe(0)
    },
    TEST_TIMEOUT_MS,
  )

  it('refuses a pattern that needs backtracking, naming the field and the feature', async () => {
    expect(linearPatternProblem(REDOS_PATTERN)).toBeUndefined()
    expect(linearPatternProblem('(a)\\1')).toMatch(/backreferences/)
    expect(linearPatternProblem('a(?=b)')).toMatch(/lookahead/)
    expect(() => parseExtraction({ prompt: { kind: 'regex', pattern: '(?<!x)y' } })).toThrow(/lookbehind.*RE2/)
    const fixture = autosrFixture()
    fixture.runtime_snapshot.extraction = { strategy: 'regex', tag_name: 'content', pattern: '(\\w+) \\1' }
    const refused = await runCli('import', '--from', 'autosr', writeJson('backref.json', fixture), '--out', 'x.json')
    expect(refused.code).toBe(2)
    expect(refused.err).toMatch(/runtime_snapshot\.extraction\.pattern: uses backreferences/)
  })
})

/** The seven credentials of the issue, each where a careless export or a hand edit could leave it. */
const PLANTED = {
  authToken: 'planted-auth-token-7f3a9c',
  authorization: 'Bearer planted-bearer-41d2e8b7',
  password: 'planted-password-hunter2',
  openaiKey: 'planted-openai-key-99af',
  secret: 'planted-secret-c0ffee',
  userInfo: 'sk-planted-userinfo-0123456789abcdef',
  queryKey: 'sk-planted-query-fedcba9876543210',
} as const

/** The autosr fixture with the seven planted credentials. */
function plantedAutosr(): any {
  const fixture = autosrFixture()
  fixture.auth_token = PLANTED.authToken
  fixture.runtime_snapshot.llm.headers = { Authorization: PLANTED.authorization, 'X-Trace': 'kept' }
  fixture.rubric.p_trains.metadata.password = PLANTED.password
  fixture.rubric.p_trains.metadata.env = { OPENAI_KEY: PLANTED.openaiKey, REGION: 'eu' }
  fixture.rubric.p_brief.metadata.secret = PLANTED.secret
  const query = `?key=${PLANTED.queryKey}&region=eu`
  fixture.runtime_snapshot.llm.base_url = `https://user:${PLANTED.userInfo}@judge.example.com:8443/v1${query}`
  return fixture
}

function expectNoPlanted(text: string): void {
  for (const value of Object.values(PLANTED)) expect(text).not.toContain(value)
}

describe('credentials in files we did not write', () => {
  it('import --from autosr drops all seven planted credentials, lists where, prints none', async () => {
    const out = join(work, 'planted-rm.json')
    const run = await runCli('import', '--from', 'autosr', writeJson('planted.json', plantedAutosr()), '--out', out)
    expect(run.code, run.err).toBe(0)
    const text = readFileSync(out, 'utf8')
    expectNoPlanted(text + run.out + run.err)
    const artifact = JSON.parse(text)
    expect(artifact.runtime.base_url).toBe('https://judge.example.com:8443/v1')
    expect(artifact.rubrics.p_trains.metadata.env).toEqual({ REGION: 'eu' })
    for (const path of [
      'auth_token',
      'runtime_snapshot.llm.headers.Authorization',
      'rubric.p_trains.metadata.password',
      'rubric.p_trains.metadata.env.OPENAI_KEY',
      'rubric.p_brief.metadata.secret',
      'runtime_snapshot.llm.base_url (user-info)',
      'runtime_snapshot.llm.base_url (query key)',
    ])
      expect(run.out).toContain(path)
    expect(await verifyArtifactId(artifact)).toBe(true)
  })

  it('deploy reads an autosr file or one of our own artifacts without a credential, re-addressed', async () => {
    const converted = await readDeployableArtifact(writeJson('planted-deploy.json', plantedAutosr()))
    expectNoPlanted(JSON.stringify(converted.artifact))
    // The seven, and the fixture's own three api keys.
    expect(converted.dropped_credentials).toHaveLength(7 + 3)

    // One of our own artifacts, hand-edited: a credential in its rubric metadata and a key-shaped check point.
    const { artifact: own } = await readDeployableArtifact(join(work, 'redos-rm.json'))
    const { artifact_id: _id, ...body } = structuredClone(own) as RmArtifact
    body.rubrics.p_trains!.metadata.password = PLANTED.password
    body.rubrics.p_trains!.criteria[0]!.check_points.push(PLANTED.userInfo)
    const edited = writeJson('own-planted.json', { artifact_id: await artifactId(body), ...body })
    const read = await readDeployableArtifact(edited)
    expectNoPlanted(JSON.stringify(read.artifact))
    expect(read.dropped_credentials).toEqual([
      'rubrics.p_trains.criteria[0].check_points[3]',
      'rubrics.p_trains.metadata.password',
    ])
    expect(await verifyArtifactId(read.artifact)).toBe(true)
    expect(read.artifact.artifact_id).toBe(own.artifact_id)
  })

  it('recognises credentials by name and by shape, not harmless names and values', () => {
    for (const name of ['api_key', 'apiKey', 'OPENAI_KEY', 'auth_token', 'Authorization', 'set-cookie', 'aws_secret'])
      expect(isCredentialName(name), name).toBe(true)
    for (const name of ['max_tokens', 'score_key', 'keywords', 'monkey', 'author', 'tokenizer'])
      expect(isCredentialName(name), name).toBe(false)
    for (const value of ['sk-proj-abcdefghijklmnop1234', 'ghp_abcdefghijklmnopqrstuvwxyz', 'AKIAABCDEFGHIJKLMNOP'])
      expect(looksLikeCredential(value), value).toBe(true)
    for (const value of ['qwen/qwen3-8b', 'Bearer', 'sk-short', 'First, … Second, …'])
      expect(looksLikeCredential(value), value).toBe(false)
  })
})

describe('deeply nested files', () => {
  it('import and deploy of a 5,000-deep file exit 2 naming the depth limit, never a RangeError', async () => {
    const file = join(work, 'deep.json')
    writeFileSync(file, `{"schema_version":"1.0","nested":${'{"a":'.repeat(5_000)}1${'}'.repeat(5_000)}}`)
    const imported = await runCli('import', '--from', 'autosr', file, '--out', join(work, 'deep-out.json'))
    expect(imported.code).toBe(2)
    expect(imported.err).toContain(`deeper than ${MAX_JSON_DEPTH} levels`)
    const deployed = await runCli('deploy', '--artifact', file, '--target', 't', '--url', 'http://127.0.0.1:9')
    expect(deployed.code).toBe(2)
    expect(deployed.err).toContain(`deeper than ${MAX_JSON_DEPTH} levels`)
  })
})

describe('fuzz: import and deploy of hostile files (fixed seed)', () => {
  /** Where a mutation lands in the autosr fixture: fields the importer reads, and places nothing reads. */
  const PLACES = [
    ['runtime_snapshot', 'extraction', 'pattern'],
    ['runtime_snapshot', 'extraction', 'strategy'],
    ['runtime_snapshot', 'llm', 'base_url'],
    ['runtime_snapshot', 'llm', 'prompt_language'],
    ['runtime_snapshot', 'seed'],
    ['rubric', 'p_trains', 'criteria', 0, 'text'],
    ['rubric', 'p_trains', 'criteria', 0, 'weight'],
    ['rubric', 'p_trains', 'grading_protocol', 'num_votes'],
    ['rubric', 'p_trains', 'metadata', 'extra'],
    ['rubric', 'p_brief', 'criteria', 1, 'negative_examples'],
    ['scoring_policy', 'objective'],
    ['artifact_id'],
  ] as const
  const SECRETS = [
    'sk-fuzz-planted-0123456789abcdef',
    'Bearer fuzz-planted-bearer-99',
    'ghp_fuzzplantedfuzzplantedfuzz12',
  ]
  const CREDENTIAL_KEYS = [
    'password',
    'api_key',
    'X-Auth-Token',
    'client_secret',
    'Cookie',
    'credentials',
    'OPENAI_KEY',
  ]
  const hostileValue = fc.oneof(
    fc.jsonValue({ maxDepth: 3 }),
    fc.constantFrom('^(a+)+$', '(a|a)*b', '(\\w+) \\1', '(?<=x)y', '(?P<q>\\w+)', '[', '\\u00e9', ''),
    fc.string({ unit: 'binary', maxLength: 30 }),
    fc.constantFrom(...SECRETS),
    fc.constantFrom(...SECRETS).map((secret) => `https://u:${secret}@h.example/v1?token=${secret}`),
    fc.integer({ min: 1, max: 200 }).map((depth) => JSON.parse(`${'['.repeat(depth)}1${']'.repeat(depth)}`)),
    fc
      .constantFrom(...CREDENTIAL_KEYS)
      .chain((key) => fc.constantFrom(...SECRETS).map((secret) => ({ [key]: secret }))),
  )
  const mutation = fc.tuple(fc.constantFrom(...PLACES), hostileValue)

  function mutated(mutations: (readonly [readonly (string | number)[], unknown])[]): any {
    const fixture = autosrFixture()
    for (const [path, value] of mutations) {
      let at = fixture
      for (const key of path.slice(0, -1)) at = at[key] ??= {}
      at[path.at(-1)!] = value
    }
    return fixture
  }

  it('import exits 0 or 2, prints no planted secret, and writes an addressed, credential-free artifact', async () => {
    let runs = 0
    await fc.assert(
      fc.asyncProperty(fc.array(mutation, { minLength: 1, maxLength: 3 }), async (mutations) => {
        const file = writeJson(`fuzz-${runs++}.json`, mutated(mutations))
        const out = join(work, 'fuzz-out.json')
        rmSync(out, { force: true })
        const run = await runCli('import', '--from', 'autosr', file, '--out', out)
        expect([0, 2]).toContain(run.code)
        for (const secret of SECRETS) expect(run.out + run.err).not.toContain(secret.replace(/^Bearer /, ''))
        if (run.code !== 0) return
        const text = readFileSync(out, 'utf8')
        for (const secret of SECRETS) expect(text).not.toContain(secret.replace(/^Bearer /, ''))
        expect(await verifyArtifactId(JSON.parse(text))).toBe(true)
      }),
      { seed: 31, numRuns: 120 },
    )
  })

  it('deploy reads a hostile file into a credential-free artifact or refuses it with ArtifactInputError', async () => {
    let runs = 0
    await fc.assert(
      fc.asyncProperty(fc.array(mutation, { minLength: 1, maxLength: 3 }), async (mutations) => {
        const file = writeJson(`fuzz-deploy-${runs++}.json`, mutated(mutations))
        const read = await readDeployableArtifact(file).catch((error: unknown) => error)
        if (read instanceof ArtifactInputError) {
          for (const secret of SECRETS) expect(read.message + read.issues.join()).not.toContain(secret)
          return
        }
        expect(read).not.toBeInstanceOf(Error)
        const { artifact } = read as Awaited<ReturnType<typeof readDeployableArtifact>>
        expect(withoutCredentials(artifact).dropped).toEqual([])
        expect(await verifyArtifactId(artifact)).toBe(true)
      }),
      { seed: 31, numRuns: 120 },
    )
  })
})
