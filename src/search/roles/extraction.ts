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
 * A `regex` pattern comes from a file someone else may have written (an autosr artifact, a config file): it runs on
 * RE2's compiled program (`re2js`) in one backward and one forward pass (src/regex), so all its matches together cost
 * time linear in the text: no pattern can stall the scorer, neither by backtracking (`^(a+)+$` against 10,000 `a`s and
 * a `!`) nor by matches that each rescan the rest of the text (`x(.*y)?` on a text of `x`s). A pattern must be valid in
 * both dialects, and one that needs backtracking (backreferences, lookaround) is refused naming the feature. The cost
 * also grows with the compiled pattern, so one extraction reads only the first `readableChars` characters of the text
 * (MAX_EXTRACTION_WORK over the program size: 10,000 for a 20-instruction pattern); a match past them is not seen, and
 * a text without a match there is kept whole. Tags (`<content>`, `<answer>`, `<think>`) are found in one forward scan
 * too, and a prompt's extraction is kept for the next vote and candidate of the same prompt.
 */
import { LRUCache } from 'lru-cache'
import { allMatches, lastClosingTagEnd, type SearchWork, tagSegments } from '../../regex/index.ts'
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
  const segments = tagSegments(text, tag).map((segment) => text.slice(segment.contentStart, segment.contentEnd))
  return joined(segments, join) ?? text
}

/**
 * Every match of `pattern` (compiled dot-all, matched in linear time by RE2; group 1 when the pattern has a group) in
 * the first `readableChars(pattern)` characters of `text`, trimmed, non-empty, joined; the original text when nothing
 * matches there. `work.steps` counts what it cost (instruction visits, all matches together).
 * @example extractRegex('Q: one\nQ: two', 'Q: (\\w+)', ',') // 'one,two'
 * @internal
 */
export function extractRegex(text: string, pattern: string, join = DEFAULT_JOIN, work?: SearchWork): string {
  const regex = compileLinear(pattern)
  const hasGroup = regex.groupCount() > 0
  const limit = readableChars(regex)
  const matches = allMatches(regex, text.length > limit ? text.slice(0, limit) : text, work)
  return (
    joined(
      matches.map((match) => match.groups[hasGroup ? 1 : 0] ?? ''),
      join,
    ) ?? text
  )
}

/**
 * A candidate's answer: its `<answer>` segments joined by a blank line; else the text without `<think>…</think>`
 * blocks (and without everything up to a stray `</think>` whose opening tag was in the chat template), trimmed;
 * the original text when that leaves nothing.
 * @example extractAnswer('<think>hmm</think> The answer is 4.') // 'The answer is 4.'
 * @internal
 */
export function extractAnswer(text: string): string {
  const answers = tagSegments(text, 'answer').map((segment) => text.slice(segment.contentStart, segment.contentEnd))
  const answer = joined(answers, DEFAULT_JOIN)
  if (answer !== undefined) return answer
  let rest = ''
  let kept = 0
  for (const block of tagSegments(text, 'think')) {
    rest += text.slice(kept, block.start)
    kept = block.end
  }
  rest += text.slice(kept)
  const stray = lastClosingTagEnd(rest, 'think')
  if (stray >= 0) rest = rest.slice(stray)
  rest = rest.trim()
  return rest === '' ? text : rest
}

/** Prompt extractions already made, by extraction and text: every vote on every candidate of a prompt asks again. */
const extractedPrompts = new LRUCache<string, string>({
  maxSize: 4_000_000,
  sizeCalculation: (value, key) => value.length + key.length,
})

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
    case 'regex': {
      const key = `${extraction.pattern}\u0000${extraction.join}\u0000${text}`
      let extracted = extractedPrompts.get(key)
      if (extracted === undefined)
        extractedPrompts.set(key, (extracted = extractRegex(text, extraction.pattern, extraction.join)))
      return extracted
    }
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
