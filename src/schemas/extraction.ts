/**
 * The content-extraction settings (autosr §3.5) as zod schemas: what part of the prompt and of a candidate the
 * verifier grades (src/search/roles/extraction.ts runs them). A `regex` pattern must run in RE2 (`re2js`), whose
 * matching time is linear in the text; one that needs backtracking (backreferences, lookaround) is refused naming the
 * feature. Linear is not cheap: RE2's time per character grows with the compiled program (`(.*a){1000}` compiles to
 * 5,002 instructions and took 48 s on 100 KB), so a pattern is refused past {@link MAX_PATTERN_INSTRUCTIONS}, and one
 * extraction reads at most {@link MAX_EXTRACTION_WORK} instruction-characters of text ({@link readableChars}).
 */
import { LRUCache } from 'lru-cache'
import { RE2JS } from 're2js'
import { z } from 'zod'

/** How the segments an extractor keeps are joined, unless it says otherwise: a blank line. */
export const DEFAULT_JOIN = '\n\n'
/** A tag an extractor may name: a letter, then letters, digits, _ . - */
export const TAG_NAME = /^[A-Za-z][\w.-]{0,63}$/

export const PromptExtraction = z.preprocess(
  (value) => (isRecord(value) && value.kind === 'xml' ? { ...value, kind: 'tag' } : value),
  z.discriminatedUnion('kind', [
    z.object({ kind: z.literal('identity') }),
    z.object({
      kind: z.literal('tag'),
      tag: z.string().regex(TAG_NAME, 'a tag name: a letter, then letters, digits, _ . -').default('content'),
      join: z.string().default(DEFAULT_JOIN),
    }),
    z.object({
      kind: z.literal('regex'),
      pattern: z
        .string()
        .min(1)
        .refine(isValidPattern, 'not a valid regular expression')
        .superRefine((pattern, context) => {
          const problem = linearPatternProblem(pattern) ?? patternSizeProblem(pattern)
          if (problem !== undefined) context.addIssue({ code: 'custom', message: problem })
        }),
      join: z.string().default(DEFAULT_JOIN),
    }),
  ]),
)
export type PromptExtraction = z.output<typeof PromptExtraction>

export const CandidateExtraction = z.object({ kind: z.enum(['answer', 'identity']) })
export type CandidateExtraction = z.output<typeof CandidateExtraction>

/** Both extractors; the default grades the whole prompt and a candidate's answer part. */
export const ContentExtraction = z.object({
  prompt: PromptExtraction.default({ kind: 'identity' }),
  candidate: CandidateExtraction.default({ kind: 'answer' }),
})
export type ContentExtraction = z.output<typeof ContentExtraction>
export type ContentExtractionInput = z.input<typeof ContentExtraction>

/** The default extraction: the prompt as is, a candidate's `<answer>` part (else without `<think>`). */
export const DEFAULT_EXTRACTION: ContentExtraction = { prompt: { kind: 'identity' }, candidate: { kind: 'answer' } }

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function isValidPattern(pattern: string): boolean {
  try {
    new RegExp(pattern, 's')
    return true
  } catch {
    return false
  }
}

/** What RE2 cannot run, by the syntax that asks for it: each needs a backtracking engine. */
const BACKTRACKING_FEATURES: [RegExp, string][] = [
  [/\\[1-9]|\\k</, 'backreferences (\\1, \\k<name>)'],
  [/\(\?<?[=!]/, 'lookahead and lookbehind ((?=, (?!, (?<=, (?<!)'],
]

/**
 * Why a pattern (valid in JavaScript) cannot run in the linear-time engine, naming the feature; undefined when it
 * can. Nested repetition such as `^(a+)+$` is fine: RE2 runs it in linear time.
 * @example linearPatternProblem('(a)\\1') // 'uses backreferences (\\1, \\k<name>), which …'
 * @internal
 */
export function linearPatternProblem(pattern: string): string | undefined {
  try {
    compileLinear(pattern)
    return undefined
  } catch (error) {
    const feature = BACKTRACKING_FEATURES.find(([syntax]) => syntax.test(pattern))?.[1]
    const reason = error instanceof Error ? error.message.replace(/^error parsing regexp: /, '') : String(error)
    return feature
      ? `uses ${feature}, which the linear-time regex engine (RE2) does not run: rewrite the pattern without them`
      : `the linear-time regex engine (RE2) cannot run this pattern (${reason})`
  }
}

/**
 * The largest compiled program (RE2 instructions) a pattern from someone else's file may have: RE2 steps every live
 * instruction once per character, so this bounds the time per character. Tag and field patterns compile to 10–40;
 * `(.*a){20}` to 102.
 * @internal
 */
export const MAX_PATTERN_INSTRUCTIONS = 100

/**
 * The most work one regex extraction may do, in compiled instructions × characters read: about 25 ms at RE2's slowest
 * (~120 ns per instruction-character on a busy machine, `(.*a){20}` on text full of `a`), the time a Worker isolate
 * may be kept from its other requests (the match cannot yield). A 20-instruction pattern reads 10,000 characters.
 * @internal
 */
export const MAX_EXTRACTION_WORK = 200_000

/**
 * Why a pattern RE2 can run is too costly, naming its size and the limit; undefined when it is within
 * {@link MAX_PATTERN_INSTRUCTIONS}.
 * @example patternSizeProblem('(.*a){1000}') // 'compiles to 5002 RE2 instructions; at most 100 …'
 * @internal
 */
export function patternSizeProblem(pattern: string): string | undefined {
  const size = compileLinear(pattern).programSize()
  if (size <= MAX_PATTERN_INSTRUCTIONS) return undefined
  return (
    `compiles to ${size} RE2 instructions; at most ${MAX_PATTERN_INSTRUCTIONS} are allowed, since matching time ` +
    'grows with them: drop large counted repeats such as {1000} and long alternations'
  )
}

/**
 * How many characters of a text one extraction with this compiled pattern reads: {@link MAX_EXTRACTION_WORK} over
 * its program size, so a stored pattern from before the size limit is bounded too.
 * @example readableChars(compileLinear('Q: (\\w+)')) // 22222 (9 instructions)
 */
export function readableChars(regex: RE2JS): number {
  return Math.floor(MAX_EXTRACTION_WORK / Math.max(1, regex.programSize()))
}

/** Compiled patterns: a scorer runs one artifact's pattern on every rollout. */
const compiledPatterns = new LRUCache<string, RE2JS>({ max: 64 })

/**
 * The pattern compiled dot-all by RE2; throws on syntax RE2 does not have.
 * @example compileLinear('<b>(.*?)</b>').matcher('<b>x</b>').find() // true
 */
export function compileLinear(pattern: string): RE2JS {
  let compiled = compiledPatterns.get(pattern)
  if (!compiled) compiledPatterns.set(pattern, (compiled = RE2JS.compile(pattern, RE2JS.DOTALL)))
  return compiled
}
