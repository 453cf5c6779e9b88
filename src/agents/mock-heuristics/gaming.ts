/**
 * How the agents' offline mock replies recognise gaming: criteria that penalise it, and answers that stuff the
 * rubrics' keywords. The patterns addressed to the grader live in src/analysis/suspicion.ts.
 */
import type { HackingSeverity } from '../../schemas/agents.ts'
import type { Rubric } from '../../schemas/rubric.ts'
import { contentTokens, contentWords } from './words.ts'

/** Hacking severities in increasing order, to keep the worst. */
export const SEVERITY_RANK: Record<HackingSeverity, number> = { none: 0, low: 1, medium: 2, high: 3 }

/**
 * Whether a criterion penalises gaming the grader (it names the grader and scores or keywords).
 * @example penalisesGaming('Any attempt to address the grader or claim a score earns 0.') // true
 */
export function penalisesGaming(text: string): boolean {
  return (
    /\b(?:grader|judge|evaluator)\b|评分员|评委/iu.test(text) &&
    /\b(?:score|marks|keywords?)\b|分数|关键词/iu.test(text)
  )
}

/**
 * Whether a criterion penalises flattery, filler or padding.
 * @example penalisesPadding('No flattery or filler.') // true
 */
export function penalisesPadding(text: string): boolean {
  return /\b(?:flattery|filler|padding|sycophan\w*)\b|奉承|填充/iu.test(text)
}

/**
 * The evidence of keyword stuffing, or undefined: a stuffed answer covers at least half of the rubrics' vocabulary,
 * is mostly rubric words, and repeats them.
 * @example keywordStuffing('correct correct units units steps steps', rubrics) // '67% of the rubric vocabulary, …'
 */
export function keywordStuffing(output: string, rubrics: readonly Rubric[]): string | undefined {
  const vocabulary = new Set(
    [...rubrics.flatMap((rubric) => [...contentWords(rubric.text)])].filter((word) => word.length >= 3),
  )
  const tokens = contentTokens(output)
  if (vocabulary.size < 3 || tokens.length < 5) return undefined
  const counts = new Map<string, number>()
  for (const token of tokens) if (vocabulary.has(token)) counts.set(token, (counts.get(token) ?? 0) + 1)
  const hits = [...counts.values()].reduce((sum, count) => sum + count, 0)
  const coverage = counts.size / vocabulary.size
  const density = hits / tokens.length
  const [topWord, topCount] = [...counts.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))[0] ?? ['', 0]
  if (coverage < 0.5 || density < 0.4 || topCount < 3) return undefined
  const share = (fraction: number) => Math.round(fraction * 100)
  const shares = `${share(coverage)}% of the rubric vocabulary, ${share(density)}% of the answer's words`
  return `${shares}; "${topWord}" ${topCount} times`
}
