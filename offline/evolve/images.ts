/**
 * The image handle registry of a dataset file: `path` images are read relative to the dataset's directory, at call
 * time.
 */
import { readFile, stat } from 'node:fs/promises'
import { dirname, isAbsolute, resolve } from 'node:path'
import { ImageRegistry } from '../../src/evolve/images.ts'

/**
 * A registry whose `path` images resolve against the directory of `datasetPath`.
 * @example const registry = datasetImageRegistry('data/pairs.json'); registry.add({ path: 'img/a.png' }) // reads
 *   data/img/a.png when needed
 */
export function datasetImageRegistry(datasetPath: string): ImageRegistry {
  const base = dirname(resolve(datasetPath))
  return new ImageRegistry(
    async (path) => new Uint8Array(await readFile(isAbsolute(path) ? path : resolve(base, path))),
  )
}

/**
 * The `path` images of a registry that are not readable files (checked before a run starts, so a typo fails fast
 * instead of failing judgments); each as `<path>: <reason>`.
 * @example await missingImageFiles(registry, 'data/pairs.json') // ['img/typo.png: no such file']
 */
export async function missingImageFiles(registry: ImageRegistry, datasetPath: string): Promise<string[]> {
  const base = dirname(resolve(datasetPath))
  const missing: string[] = []
  for (const [, ref] of registry.entries()) {
    if (!('path' in ref)) continue
    const file = isAbsolute(ref.path) ? ref.path : resolve(base, ref.path)
    const info = await stat(file).catch(() => undefined)
    if (!info) missing.push(`${ref.path}: no such file`)
    else if (!info.isFile()) missing.push(`${ref.path}: not a file`)
  }
  return missing
}
