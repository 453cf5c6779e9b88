/**
 * Extraction in linear time, whole (issue 46 item 1): all the matches of one extraction together cost work linear in
 * the text. Calling RE2's `find()` after each match rescans the rest of the text per match, so `x(.*y)?` on 100 KB of
 * `x` took 29 s; JavaScript's engine did the same for the built-in tags (200 KB of `<think ` took 8 s). The properties:
 * the linear matcher gives RE2's matches and groups, the tag scanner gives the JavaScript regex's segments, and any
 * pattern an import accepts costs at most a constant times MAX_EXTRACTION_WORK on 100 KB of text made to keep it busy.
 * The wall-clock check runs in a child of its own, so it fails (never hangs) where the cost is not linear.
 */
import fc from 'fast-check'
import { RE2JS } from 're2js'
import { describe, expect, it } from 'vitest'
import { allMatches, lastClosingTagEnd, tagSegments } from '../../src/regex/index.ts'
import { compileLinear, MAX_EXTRACTION_WORK } from '../../src/schemas/extraction.ts'
import { extractAnswer, extractRegex, extractTag } from '../../src/search/roles/extraction.ts'
import { runChild } from '../support/child.ts'
import { acceptedPattern, adversarialTexts, regexPattern, shortText } from '../support/patterns.ts'

/** RE2's own matches: `find()` after `find()`, every group read. */
function re2Matches(regex: RE2JS, text: string) {
  const matcher = regex.matcher(text)
  const found = []
  while (matcher.find()) {
    const groups = Array.from({ length: matcher.groupCount() + 1 }, (_, group) => matcher.group(group) ?? undefined)
    found.push({ start: matcher.start(), end: matcher.end(), groups })
  }
  return found
}

/** The JavaScript regex the tag scanner stands for, and its segments. */
function regexSegments(text: string, tag: string) {
  return [...text.matchAll(new RegExp(`<${tag}(?:\\s[^>]*)?>([\\s\\S]*?)</${tag}\\s*>`, 'gi'))].map((match) => ({
    start: match.index,
    end: match.index + match[0].length,
    content: match[1],
  }))
}

/** The patterns and the worst this test's search found (bench/regex-budget.ts --search), with their texts. */
const WORST: [string, string][] = [
  ['x(.*y)?', 'x'],
  ['(.*y|x)', 'x'],
  [' (.*\\x00)?', 'the quick brown fox jumps over the lazy dog. '],
  ['(?:x|.*y)*?', 'x'],
]
/** The built-in tags' worst texts: openers that never close. */
const WORST_TAGS = ['<think ', '<answer>', '</think ', '<content>']

describe('extraction in linear time', () => {
  it('finds the matches and groups RE2 finds, on any pattern and text', () => {
    fc.assert(
      fc.property(regexPattern(), shortText(), (pattern, text) => {
        const regex = RE2JS.compile(pattern, RE2JS.DOTALL)
        expect(allMatches(regex, text)).toEqual(re2Matches(regex, text))
      }),
      { numRuns: 3_000 },
    )
  })

  it('finds the segments the JavaScript tag regex finds, and the same last closing tag', () => {
    const piece = fc.constantFrom('<a', '<A', '</a', '</A', '>', ' ', '\n', 'x', '<ab', '</ab', '</a >', '\u00a0', 'K')
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 30 }), fc.constantFrom('a', 'ab'), (pieces, tag) => {
        const text = pieces.join('')
        const segments = tagSegments(text, tag).map((segment) => ({
          start: segment.start,
          end: segment.end,
          content: text.slice(segment.contentStart, segment.contentEnd),
        }))
        expect(segments).toEqual(regexSegments(text, tag))
        const last = text.search(new RegExp(`</${tag}\\s*>(?![\\s\\S]*</${tag}\\s*>)`, 'i'))
        const lastEnd = last < 0 ? -1 : last + text.slice(last).match(new RegExp(`^</${tag}\\s*>`, 'i'))![0].length
        expect(lastClosingTagEnd(text, tag)).toBe(lastEnd)
      }),
      { numRuns: 5_000 },
    )
  })

  it('costs any accepted pattern on 100 KB of text made to keep it busy at most 4 × MAX_EXTRACTION_WORK', () => {
    fc.assert(
      fc.property(acceptedPattern(), (pattern) => {
        for (const text of adversarialTexts(pattern, 100_000)) {
          const work = { steps: 0 }
          extractRegex(text, pattern, '\n', work)
          expect(work.steps, `${pattern} on ${JSON.stringify(text.slice(0, 12))}…`).toBeLessThanOrEqual(
            4 * MAX_EXTRACTION_WORK,
          )
        }
      }),
      { numRuns: 40 },
    )
    // The bound is not loose: the worst shapes come within a factor of it.
    const work = { steps: 0 }
    extractRegex('x'.repeat(100_000), '(.*y|x)', '\n', work)
    expect(work.steps).toBeGreaterThan(MAX_EXTRACTION_WORK)
    expect(compileLinear('(.*y|x)').programSize()).toBeLessThan(10)
  }, 60_000)

  it('still extracts what it did: groups, dot-all, tags, answers, a stray </think>', () => {
    expect(extractRegex('x1 y x2 y', 'x(\\d)', ',')).toBe('1,2')
    expect(extractRegex('a\nb', 'a.b')).toBe('a\nb')
    expect(extractRegex('xxx', 'x(.*y)?', '')).toBe('xxx')
    expect(extractRegex('xxy', 'x(.*y)?', '|')).toBe('xy')
    expect(extractTag('<q k="1">one</q > and <Q>two</q>', 'q', '|')).toBe('one|two')
    expect(extractAnswer('<think>a</think>b<answer> 4 </answer>')).toBe('4')
    expect(extractAnswer('<think>a</think> b <think x>c</think> d')).toBe('b  d')
    expect(extractAnswer('template</think>reasoning</think> the answer')).toBe('the answer')
  })

  it('extracts 100 KB with the worst patterns, and 200 KB of unclosed tags, each in under a second', async () => {
    const script = `
      import { extractAnswer, extractRegex, extractTag } from './src/search/roles/extraction.ts'
      const fill = (piece, chars) => piece.repeat(Math.ceil(chars / piece.length)).slice(0, chars)
      const times = {}
      for (const [pattern, piece] of ${JSON.stringify(WORST)}) {
        extractRegex('warm', pattern)
        const started = performance.now()
        extractRegex(fill(piece, 100_000), pattern)
        times[pattern] = performance.now() - started
      }
      for (const piece of ${JSON.stringify(WORST_TAGS)}) {
        const started = performance.now()
        extractAnswer(fill(piece, 200_000))
        extractTag(fill(piece, 200_000), 'content')
        times[piece] = performance.now() - started
      }
      console.log(JSON.stringify(times))`
    const child = await runChild(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {}, 90_000)
    expect(child.code, child.err).toBe(0)
    const times = JSON.parse(child.out) as Record<string, number>
    for (const [what, ms] of Object.entries(times)) expect(ms, what).toBeLessThan(1_000)
  }, 120_000)
})
