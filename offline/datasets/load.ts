/** Datasets from files: read, hash and parse (JSONL by the extension, otherwise the content decides). */
import { readFile } from 'node:fs/promises'
import { extname, resolve } from 'node:path'
import {
  type DatasetFormat,
  DatasetError,
  datasetHash,
  type DatasetShape,
  parseDatasetText,
} from '../../src/datasets/index.ts'
import type { PreferenceDataset } from '../../src/search/types.ts'

export interface LoadDatasetOptions {
  /** Force JSON or JSONL; by default `.jsonl`/`.ndjson` files are JSONL and the content decides for the rest. */
  format?: DatasetFormat
  /** Group of the prompts that have none (e.g. `natural` for LLMBar's Natural set). */
  group?: string
}

export interface LoadedDataset {
  dataset: PreferenceDataset
  /** SHA-256 (hex) of the file, for run manifests. */
  sha256: string
  /** Absolute path of the file. */
  path: string
  format: DatasetFormat
  shape: DatasetShape
}

const JSONL_EXTENSIONS = new Set(['.jsonl', '.ndjson'])

/**
 * Reads and parses a dataset file. A missing or malformed file is a DatasetError whose message starts
 * with the path as given; other I/O failures are thrown as they are.
 * @example
 * const { dataset, sha256 } = await loadDataset('examples/demo.json')
 * dataset.prompts.length // 3
 */
export async function loadDataset(path: string, options: LoadDatasetOptions = {}): Promise<LoadedDataset> {
  const text = await readText(path)
  const format = options.format ?? (JSONL_EXTENSIONS.has(extname(path).toLowerCase()) ? 'jsonl' : undefined)
  const parsed = parseDatasetText(text, {
    name: path,
    ...(format ? { format } : {}),
    ...(options.group ? { group: options.group } : {}),
  })
  return { ...parsed, sha256: await datasetHash(text), path: resolve(path) }
}

async function readText(path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8')
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT') throw new DatasetError([{ place: '', reason: 'no such file' }], path)
    if (code === 'EISDIR') throw new DatasetError([{ place: '', reason: 'is a directory, not a dataset file' }], path)
    throw error
  }
}
