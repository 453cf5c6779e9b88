/** What a dataset holds, in numbers, and the fingerprint of the text it came from. */
import { sha256Hex } from '../hash/index.ts'
import type { PreferenceDataset } from '../search/types.ts'

export interface DatasetSummary {
  prompts: number
  candidates: number
  candidates_per_prompt: { min: number; max: number; mean: number }
  /** Candidates with a `rank`, with a `quality`, and with neither. */
  labels: { rank: number; quality: number; none: number }
  /** Every candidate has a rank (autosr then picks its rank judge). */
  fully_ranked: boolean
  /** Prompts per group; prompts without one are counted in `ungrouped`. */
  groups: Record<string, number>
  ungrouped: number
  /** Candidates per source. */
  sources: Record<string, number>
}

/**
 * Counts of prompts, candidates, labels, groups and sources.
 * @example datasetSummary(parseDataset(text)) // { prompts: 3, candidates: 18, candidates_per_prompt: { min: 6, max: 6,
 *   mean: 6 }, labels: { rank: 18, quality: 0, none: 0 }, fully_ranked: true, … }
 */
export function datasetSummary(dataset: PreferenceDataset): DatasetSummary {
  const sizes = dataset.prompts.map((item) => item.candidates.length)
  const candidates = dataset.prompts.flatMap((item) => item.candidates)
  const groups: Record<string, number> = {}
  const sources: Record<string, number> = {}
  let ungrouped = 0
  for (const item of dataset.prompts) {
    if (item.group === undefined) ungrouped++
    else groups[item.group] = (groups[item.group] ?? 0) + 1
  }
  for (const candidate of candidates) sources[candidate.source] = (sources[candidate.source] ?? 0) + 1
  const ranked = candidates.filter((candidate) => candidate.label.rank !== undefined).length
  return {
    prompts: dataset.prompts.length,
    candidates: candidates.length,
    candidates_per_prompt: {
      min: sizes.length ? Math.min(...sizes) : 0,
      max: sizes.length ? Math.max(...sizes) : 0,
      mean: sizes.length ? candidates.length / sizes.length : 0,
    },
    labels: {
      rank: ranked,
      quality: candidates.filter((candidate) => candidate.label.quality !== undefined).length,
      none: candidates.filter(
        (candidate) => candidate.label.rank === undefined && candidate.label.quality === undefined,
      ).length,
    },
    fully_ranked: candidates.length > 0 && ranked === candidates.length,
    groups,
    ungrouped,
    sources,
  }
}

/**
 * SHA-256 (hex) of a dataset's text, as run manifests record it (`dataset_sha256`); equals the file's
 * hash for UTF-8 text. Web Crypto, so it runs in Workers and Node alike.
 * @example await datasetHash('{"prompts":[]}') // '9d7c…' (64 hex digits)
 */
export function datasetHash(text: string): Promise<string> {
  return sha256Hex(text)
}
