/** PreferenceDataset → the autosr JSON shape (§1.1), which autosr itself and parseDataset both read. */
import type { PreferenceDataset } from '../search/types.ts'

interface AutosrCandidateJson {
  candidate_id: string
  text: string
  source: string
  /** Free metadata, with the label's `rank`/`quality` put back where autosr reads them. */
  metadata: Record<string, unknown>
}

interface AutosrPromptJson {
  prompt_id: string
  prompt: string
  /** Not read by autosr (it ignores unknown keys); kept so that a conversion round-trips. */
  group?: string
  /** A reference answer shown to judges as data (parseDataset reads it; autosr ignores it). */
  reference?: string
  candidates: AutosrCandidateJson[]
  metadata: Record<string, unknown>
}

/** @internal */
export interface AutosrDatasetJson {
  prompts: AutosrPromptJson[]
}

/**
 * The dataset in the autosr shape: labels go back into each candidate's `metadata`.
 * @example toAutosrJson(dataset).prompts[0]?.candidates[0] // { candidate_id: 'c1', text: '…', source: 'strong',
 *   metadata: { rank: 1 } }
 * @internal
 */
export function toAutosrJson(dataset: PreferenceDataset): AutosrDatasetJson {
  return {
    prompts: dataset.prompts.map((item) => ({
      prompt_id: item.prompt_id,
      prompt: item.prompt,
      ...(item.group === undefined ? {} : { group: item.group }),
      ...(item.reference === undefined ? {} : { reference: item.reference }),
      candidates: item.candidates.map((candidate) => ({
        candidate_id: candidate.candidate_id,
        text: candidate.text,
        source: candidate.source,
        metadata: {
          ...candidate.metadata,
          ...(candidate.label.rank === undefined ? {} : { rank: candidate.label.rank }),
          ...(candidate.label.quality === undefined ? {} : { quality: candidate.label.quality }),
        },
      })),
      metadata: item.metadata,
    })),
  }
}

/**
 * The autosr JSON text of a dataset: indent 2, not ASCII-escaped, with a final newline.
 * @example formatAutosrJson(dataset) // '{\n  "prompts": [\n …'
 */
export function formatAutosrJson(dataset: PreferenceDataset): string {
  return `${JSON.stringify(toAutosrJson(dataset), null, 2)}\n`
}
