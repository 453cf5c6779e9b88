/** The judge library as its router, chain analyzer and evolver see it: entry summaries and judged chains. */

/** An entry of the judge library as routers, analyzers and evolvers see it. */
export interface LibraryEntrySummary {
  name: string
  kind: 'skill' | 'tool'
  description: string
}

/**
 * One judged training pair as the chain analyzer reads it. `label`: 'A' | 'B' | 'tie'; `prediction`: the same, or
 * 'inconsistent' when the two presentation orders disagreed; null on a failure.
 */
export interface LibraryChainResult {
  id: string
  instruction: string
  label: string
  prediction: string | null
  correct: boolean
  chain: string
}
