/**
 * Preference datasets: parse the autosr shape and pairwise benchmarks (LLMBar, JudgeBench,
 * chosen/rejected) from JSON or JSONL text into the search's PreferenceDataset, summarise, hash and
 * write them back. Pure: no I/O (see offline/datasets for files).
 */
export { DatasetError, formatIssues, type DatasetIssue } from './errors.ts'
export {
  locateJsonError,
  readJsonDocument,
  type DatasetFormat,
  type JsonDocument,
  type JsonFault,
} from './json-text.ts'
export {
  parseDataset,
  parseDatasetText,
  type DatasetShape,
  type ParseDatasetOptions,
  type ParsedDataset,
} from './parse.ts'
export { generatedPromptId, PAIR_SHAPES, type PairShape } from './pairwise.ts'
export { readImageRefs, type ImageRef } from './images.ts'
export { datasetHash, datasetSummary, type DatasetSummary } from './summary.ts'
export {
  formatAutosrJson,
  toAutosrJson,
  type AutosrCandidateJson,
  type AutosrDatasetJson,
  type AutosrPromptJson,
} from './serialize.ts'
