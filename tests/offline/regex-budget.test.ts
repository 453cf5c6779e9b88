/**
 * The regex budget (issue 39 item 1): RE2 is linear in the text but its time per character grows with the compiled
 * pattern, so `(.*a){1000}` (5,002 instructions, past the repeat limit of 1,000) is refused at import naming the field,
 * and one extraction reads at most MAX_EXTRACTION_WORK instruction-characters, so the costliest accepted pattern on
 * 100 KB finishes well under a second.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  compileLinear,
  MAX_EXTRACTION_WORK,
  MAX_PATTERN_INSTRUCTIONS,
  patternSizeProblem,
  readableChars,
} from '../../src/schemas/extraction.ts'
import { extractRegex, parseExtraction } from '../../src/search/roles/extraction.ts'
import { autosrFixture } from '../support/autosr-fixture.ts'
import { runChild } from '../support/child.ts'
import { runCli } from '../support/cli.ts'

/** The pattern: 1,000 repeats pass the repeat limit and compile to 5,002 instructions. */
const HUGE = '(.*a){1000}'
/** The costliest shape within the instruction limit: as many `.*a` as fit. */
const WORST_ACCEPTED = '(.*a){19}'

let work: string
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'rh-regex-budget-'))
})
afterAll(() => rmSync(work, { recursive: true, force: true }))

describe('a regex budget', () => {
  it('refuses a pattern past the instruction limit, in the schema and at import, naming the field', async () => {
    expect(compileLinear(HUGE).programSize()).toBeGreaterThan(MAX_PATTERN_INSTRUCTIONS)
    expect(patternSizeProblem(HUGE)).toMatch(/RE2 instructions; at most 100/)
    expect(patternSizeProblem(WORST_ACCEPTED)).toBeUndefined()
    expect(() => parseExtraction({ prompt: { kind: 'regex', pattern: HUGE } })).toThrow(/RE2 instructions/)
    const fixture = autosrFixture()
    fixture.runtime_snapshot.extraction = { strategy: 'regex', tag_name: 'content', pattern: HUGE }
    const file = join(work, 'huge.json')
    writeFileSync(file, JSON.stringify(fixture))
    const refused = await runCli('import', '--from', 'autosr', file, '--out', join(work, 'out.json'))
    expect(refused.code).toBe(2)
    expect(refused.err).toMatch(/runtime_snapshot\.extraction\.pattern: compiles to \d+ RE2 instructions/)
  })

  it('reads at most MAX_EXTRACTION_WORK instruction-characters: the worst accepted pattern, 100 KB, <1 s', async () => {
    const size = compileLinear(WORST_ACCEPTED).programSize()
    expect(size).toBeLessThanOrEqual(MAX_PATTERN_INSTRUCTIONS)
    expect(readableChars(compileLinear(WORST_ACCEPTED))).toBe(Math.floor(MAX_EXTRACTION_WORK / size))
    // A match past the characters read is not seen; one within them is.
    const limit = readableChars(compileLinear('<q>(.*?)</q>'))
    expect(extractRegex(`${' '.repeat(limit)}<q>late</q>`, '<q>(.*?)</q>')).not.toBe('late')
    expect(extractRegex(`<q>early</q>${' '.repeat(limit)}`, '<q>(.*?)</q>')).toBe('early')
    // Timed in a child of its own, so the test fails (never hangs) where the budget does not hold.
    const script = `
      import { extractRegex } from './src/search/roles/extraction.ts'
      const text = 'a '.repeat(50_000)
      extractRegex('warm a', ${JSON.stringify(WORST_ACCEPTED)})
      const started = performance.now()
      extractRegex(text, ${JSON.stringify(WORST_ACCEPTED)})
      console.log(JSON.stringify({ ms: performance.now() - started }))`
    const child = await runChild(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {}, 30_000)
    expect(child.code, child.err).toBe(0)
    expect(JSON.parse(child.out).ms).toBeLessThan(1_000)
  }, 60_000)
})
