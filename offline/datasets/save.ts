/** Datasets to files, in the autosr JSON shape, written atomically. */
import { randomBytes } from 'node:crypto'
import { mkdir, open, rename, rm } from 'node:fs/promises'
import { basename, dirname, join, resolve } from 'node:path'
import { datasetHash, formatAutosrJson } from '../../src/datasets/index.ts'
import type { PreferenceDataset } from '../../src/search/types.ts'

export interface SavedDataset {
  /** Absolute path of the written file. */
  path: string
  bytes: number
  sha256: string
}

/**
 * Writes `dataset` as autosr JSON (labels back in candidate metadata), creating its directory: a temporary file in the same
 * directory, flushed to disk, then renamed over `path`, so readers never see half a file.
 * @example await saveDataset('out/llmbar-natural.json', dataset) // { path: '/…/out/llmbar-natural.json', bytes: 183422, sha256: '…' }
 */
export async function saveDataset(path: string, dataset: PreferenceDataset): Promise<SavedDataset> {
  const target = resolve(path)
  const text = formatAutosrJson(dataset)
  await mkdir(dirname(target), { recursive: true })
  const temporary = join(dirname(target), `.${basename(target)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`)
  const file = await open(temporary, 'w')
  try {
    await file.writeFile(text, 'utf8')
    await file.sync()
    await file.close()
    await rename(temporary, target)
  } catch (error) {
    await file.close().catch(() => undefined)
    await rm(temporary, { force: true })
    throw error
  }
  return { path: target, bytes: Buffer.byteLength(text), sha256: await datasetHash(text) }
}
