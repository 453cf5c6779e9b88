/**
 * Preference datasets: parse the autosr shape and pairwise benchmarks (LLMBar, JudgeBench,
 * chosen/rejected) from JSON or JSONL text into the search's PreferenceDataset, summarise, hash and
 * write them back. Pure: no I/O (see offline/datasets for files).
 */
export { DatasetError } from './errors.ts'

export { readJsonDocument, type DatasetFormat } from './json-text.ts'
export { parseDatasetText, type DatasetShape } from './parse.ts'

export { datasetHash, datasetSummary, type DatasetSummary } from './summary.ts'

export { formatAutosrJson } from './serialize.ts'
