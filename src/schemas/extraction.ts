/**
 * The content-extraction settings (autosr §3.5) as zod schemas: what part of the prompt and of a candidate the
 * verifier grades (src/search/roles/extraction.ts runs them). A `regex` pattern must run in RE2 (`re2js`), whose
 * matching time is linear in the text; one that needs backtracking (backreferences, lookaround) is refused naming the
 * feature.
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
          const problem = linearPatternProblem(pattern)
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
