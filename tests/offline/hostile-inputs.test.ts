/**
 * Files someone else wrote, read by the CLI: an autosr artifact whose extraction pattern backtracks exponentially in
 * JavaScript's engine (`^(a+)+$` against 10,000 `a`s and a `!`) runs in linear time in search extraction and in
 * `bench`; a pattern that needs backtracking is refused naming the field and the feature. Every path that could run
 * the pattern forever runs in a child process with a timeout, so the test fails (never hangs) where the pattern would
 * stall.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { linearPatternProblem, parseExtraction } from '../../src/search/roles/extraction.ts'
import { autosrFixture } from '../support/autosr-fixture.ts'
import { runChild, runRewardHarness } from '../support/child.ts'
import { runCli } from '../support/cli.ts'

/** The pattern of the issue: nested repetition, exponential in a backtracking engine on a near miss. */
const REDOS_PATTERN = '^(a+)+$'
const NEAR_MISS = `${'a'.repeat(10_000)}!`
/** A bound for a child that must finish: its start on a busy 2-core machine, not the pattern, takes the time. */
const CHILD_TIMEOUT_MS = 60_000

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
  it('search extraction runs ^(a+)+$ on 10,000 a and a ! in under a second', async () => {
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
  })

  it('an imported autosr artifact with that pattern scores the near miss in offline bench', async () => {
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
  })

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
