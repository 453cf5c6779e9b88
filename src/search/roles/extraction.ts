/**
 * Content extraction for the verifier (autosr §3.5): what part of the prompt and of a candidate the
 * verifier grades. Pure functions; the judge, proposer and initializer see the raw texts.
 *
 * - Prompt: `identity` (default); `tag` (`<tag>…</tag>` segments, `xml` is an alias of `tag`);
 *   `regex` (all matches of a dot-all pattern, group 1 when the pattern has groups). Segments are
 *   trimmed, empty ones dropped, the rest joined by `join` (default a blank line); no match → the
 *   original text.
 * - Candidate: `answer` (default: the `<answer>` segments, else the text without `<think>` blocks,
 *   else the original) or `identity`.
 *
 * A `regex` pattern comes from a file someone else may have written (an autosr artifact, a config file): it runs in
 * RE2 (`re2js`), whose matching time is linear in the text, so no pattern can stall the scorer (`^(a+)+$` against
 * 10,000 `a`s and a `!` backtracks for ever in JavaScript's engine). A pattern must be valid in both dialects, and one
 * that needs backtracking (backreferences, lookaround) is refused naming the feature. RE2's cost also grows with the
 * compiled pattern, so one extraction reads only the first `readableChars` characters of the text (MAX_EXTRACTION_WORK
 * over the program size: 10,000 for a 20-instruction pattern); a match past them is not seen, and a text without a
 * match there is kept whole. The built-in patterns below keep JavaScript's engine: they are ours and do not backtrack.
 */
import {
  type CandidateExtraction,
  compileLinear,
  ContentExtraction,
  DEFAULT_JOIN,
  type PromptExtraction,
  readableChars,
  TAG_NAME,
} from '../../schemas/extraction.ts'

/**
 * The trimmed, non-empty `<tag>…</tag>` segments of `text` (case-insensitive, across lines, non-greedy), joined;
 * the original text when there are none.
 * @example extractTag('a <content> x </content> b <CONTENT>y</CONTENT>', 'content', ' | ') // 'x | y'
 * @internal
 */
export function extractTag(text: string, tag = 'content', join = DEFAULT_JOIN): string {
  if (!TAG_NAME.test(tag)) throw new RangeError(`extractTag: "${tag}" is not a tag name`)
  const name = tag.replace(/[.]/g, '\\.')
  const segments = [...text.matchAll(new RegExp(`<${name}(?:\\s[^>]*)?>([\\s\\S]*?)</${name}\\s*>`, 'gi'))].map(
    (match) => match[1]!,
  )
  return joined(segments, join) ?? text
}

/**
 * Every match of `pattern` (compiled dot-all, matched in linear time by RE2; group 1 when the pattern has a group) in
 * the first `readableChars(pattern)` characters of `text`, trimmed, non-empty, joined; the original text when nothing
 * matches there.
 * @example extractRegex('Q: one\nQ: two', 'Q: (\\w+)', ',') // 'one,two'
 * @internal
 */
export function extractRegex(text: string, pattern: string, join = DEFAULT_JOIN): string {
  const regex = compileLinear(pattern)
  const hasGroup = regex.groupCount() > 0
  const limit = readableChars(regex)
  const matcher = regex.matcher(text.length > limit ? text.slice(0, limit) : text)
  const segments: string[] = []
  while (matcher.find()) segments.push((hasGroup ? matcher.group(1) : matcher.group(0)) ?? '')
  return joined(segments, join) ?? text
}

/**
 * A candidate's answer: its `<answer>` segments joined by a blank line; else the text without `<think>…</think>`
 * blocks (and without everything up to a stray `</think>` whose opening tag was in the chat template), trimmed;
 * the original text when that leaves nothing.
 * @example extractAnswer('<think>hmm</think> The answer is 4.') // 'The answer is 4.'
 * @internal
 */
export function extractAnswer(text: string): string {
  const answers = joined(
    [...text.matchAll(/<answer(?:\s[^>]*)?>([\s\S]*?)<\/answer\s*>/gi)].map((match) => match[1]!),
    DEFAULT_JOIN,
  )
  if (answers !== undefined) return answers
  let rest = text.replace(/<think(?:\s[^>]*)?>[\s\S]*?<\/think\s*>/gi, '')
  const stray = rest.search(/<\/think\s*>(?![\s\S]*<\/think\s*>)/i)
  if (stray >= 0) rest = rest.slice(stray).replace(/^<\/think\s*>/i, '')
  rest = rest.trim()
  return rest === '' ? text : rest
}

/**
 * The part of a prompt the verifier sees.
 * @example extractPrompt('<content>Write a haiku.</content> (system noise)', { kind: 'tag', tag: 'content', join:
 *   '\n\n' }) // 'Write a haiku.'
 */
export function extractPrompt(text: string, extraction: PromptExtraction): string {
  switch (extraction.kind) {
    case 'identity':
      return text
    case 'tag':
      return extractTag(text, extraction.tag, extraction.join)
    case 'regex':
      return extractRegex(text, extraction.pattern, extraction.join)
  }
}

/**
 * The part of a candidate the verifier grades.
 * @example extractCandidate('<think>…</think><answer>4</answer>', { kind: 'answer' }) // '4'
 */
export function extractCandidate(text: string, extraction: CandidateExtraction): string {
  return extraction.kind === 'identity' ? text : extractAnswer(text)
}

/**
 * Reads an extraction setting (e.g. from a CLI or config file), with defaults for what is left out.
 * @example parseExtraction({ prompt: { kind: 'xml', tag: 'question' } }).candidate // { kind: 'answer' }
 */
export function parseExtraction(input: unknown = {}): ContentExtraction {
  return ContentExtraction.parse(input)
}

function joined(segments: readonly string[], join: string): string | undefined {
  const kept = segments.map((segment) => segment.trim()).filter((segment) => segment !== '')
  return kept.length === 0 ? undefined : kept.join(join)
}
