// Whether the CLI's prebuilt bundle (offline/cli/bundle.ts) may run: plain JavaScript, because bin.js checks it before
// anything can compile TypeScript.
import { readFileSync, statSync } from 'node:fs'

/**
 * The bundle's entry in `bundleDir` when every file it was built from still has the mtime and size it had then (none
 * missing); otherwise undefined, and the caller runs the sources.
 * @param {URL} bundleDir the bundle's folder, ending in '/'
 * @returns {URL | undefined}
 * @example const entry = freshBundleEntry(new URL('../../dist/cli/', import.meta.url))
 */
export function freshBundleEntry(bundleDir) {
  try {
    const { root, sources } = JSON.parse(readFileSync(new URL('sources.json', bundleDir), 'utf8'))
    const rootUrl = new URL(root, bundleDir)
    for (const [path, built] of Object.entries(sources)) {
      const now = statSync(new URL(path, rootUrl))
      if (now.mtimeMs !== built.mtimeMs || now.size !== built.size) return undefined
    }
    return new URL('index.cjs', bundleDir)
  } catch {
    return undefined
  }
}
