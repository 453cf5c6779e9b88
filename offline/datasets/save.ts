/** Datasets to files, in the autosr JSON shape, written atomically. */
import { resolve } from 'node:path'
import { datasetHash, formatAutosrJson } from '../../src/datasets/index.ts'
import type { PreferenceDataset } from '../../src/search/types.ts'
import { writeFileAtomic } from '../search/atomic.ts'

export interface SavedDataset {
  /** Absolute path of the written file. */
  path: string
  bytes: number
  sha256: string
}

/**
 * Writes `dataset` as autosr JSON (labels back in candidate metadata), creating its directory, atomically: readers
 * never see half a file.
 * @example await saveDataset('out/llmbar-natural.json', dataset) // { path: '/…/out/llmbar-natural.json', bytes:
 *   183422, sha256: '…' }
 */
export async function saveDataset(path: string, dataset: PreferenceDataset): Promise<SavedDataset> {
  const target = resolve(path)
  const text = formatAutosrJson(dataset)
  await writeFileAtomic(target, text)
  return { path: target, bytes: Buffer.byteLength(text), sha256: await datasetHash(text) }
}
