/**
 * Regular expressions and texts for the regex properties and the regex bench: patterns built from the pieces that make
 * RE2 work hardest (`.*`, optional and alternative branches, counted repeats, classes, anchors, word boundaries, case
 * folding, astral characters), and texts built from a pattern's own literal characters, which keep the most threads
 * alive for longest.
 */
import fc from 'fast-check'
import { PromptExtraction } from '../../src/schemas/extraction.ts'

/** The atoms patterns are made of. */
const ATOMS = [
  'a',
  'b',
  'x',
  'y',
  ' ',
  '.',
  '.*',
  '.*?',
  '\\w',
  '\\s',
  '\\d',
  '[ab]',
  '[^a]',
  '\\x00',
  '\\n',
  '\\b',
  '\\B',
  '^',
  '$',
  '(?m:^)',
  '(?m:$)',
  '(?i:A)',
  '\\pL',
  '😀',
  '(?-s:.)',
  '\\A',
  '\\z',
  '[[:alpha:]]',
  '\\Qa.\\E',
]
const QUANTIFIERS = ['*', '+', '?', '*?', '+?', '??', '{0,3}', '{2}', '{1,4}?']

/**
 * Any pattern over {@link ATOMS}: sequences, alternations, quantifiers, capturing and non-capturing groups.
 * @example fc.sample(regexPattern(), 3) // ['x(.*y)?', '(?:\\b|a)*?', …]
 */
export function regexPattern(): fc.Arbitrary<string> {
  const { node } = fc.letrec<{ node: string }>((tie) => ({
    node: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      fc.constantFrom(...ATOMS),
      fc.tuple(tie('node'), tie('node')).map(([a, b]) => `${a}${b}`),
      fc.tuple(tie('node'), tie('node')).map(([a, b]) => `(?:${a}|${b})`),
      fc.tuple(tie('node'), fc.constantFrom(...QUANTIFIERS)).map(([a, q]) => `(?:${a})${q}`),
      tie('node').map((a) => `(${a})`),
    ),
  }))
  return node
}

/**
 * Patterns a run's or artifact's `extraction.prompt` accepts ({@link PromptExtraction}: RE2 can run them, within the
 * instruction limit).
 * @example fc.sample(acceptedPattern(), 1)
 */
export function acceptedPattern(): fc.Arbitrary<string> {
  return regexPattern().filter((pattern) => PromptExtraction.safeParse({ kind: 'regex', pattern }).success)
}

/**
 * A short text of pieces that the atoms match (and miss): where differential properties find disagreements.
 * @example fc.sample(shortText(), 1) // ['ab 😀\nx']
 */
export function shortText(): fc.Arbitrary<string> {
  const pieces = fc.constantFrom('a', 'b', 'x', 'y', ' ', '\n', 'A', '😀', '\ud83d', '1', '_', '\u0000', '.')
  return fc.array(pieces, { maxLength: 24 }).map((parts) => parts.join(''))
}

/**
 * Texts of `chars` characters that keep a pattern's matcher busiest: each of its literal characters repeated, a pair
 * of them alternating, and English prose (which no crafted prompt needs).
 * @example adversarialTexts('x(.*y)?', 10).map((text) => text.slice(0, 4)) // ['xxxx', 'yyyy', 'xyxy', 'the ', …]
 */
export function adversarialTexts(pattern: string, chars: number): string[] {
  const literals = [...new Set(pattern.replace(/\\[a-zA-Z]|\[[^\]]*\]|[()?*+{}|^$.\\:\d,]/g, '').split(''))]
  const fills = [...literals, literals.join(''), 'a ', 'the quick brown fox jumps over the lazy dog. ']
  return [...new Set(fills.filter((fill) => fill !== ''))].map((fill) =>
    fill.repeat(Math.ceil(chars / fill.length)).slice(0, chars),
  )
}
