// Runs the CLI's CommonJS bundle (offline/cli/bundle.ts) with V8's code cache: plain JavaScript, loaded by bin.js
// before anything can compile TypeScript. Node 20 has no compile cache of its own (module.enableCompileCache is
// Node 22), so the bundle is compiled through node:vm, which takes and makes V8 code caches.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Script } from 'node:vm'

/**
 * The code cache a run of `argv` uses and makes: one per command (and one for its help), since a cache holds the
 * functions its run compiled and `search` compiles other functions than `--help` or `serve`.
 * @param {URL} bundle the bundle's entry
 * @param {string[]} argv the CLI's arguments
 * @returns {string} the cache file's path
 * @example codeCacheFile(new URL('file:///app/dist/cli/index.cjs'), ['search', '--help'])
 *   // '/app/dist/cli/code-cache/search-help.bin'
 */
export function codeCacheFile(bundle, argv) {
  const first = argv.find((arg) => !arg.startsWith('-'))
  // A name from the command line becomes a file name only when it is a plain command word.
  const command = first === undefined ? 'none' : /^[a-z][a-z0-9-]{0,40}$/.test(first) ? first : 'other'
  const help = argv.includes('--help') || argv.includes('-h') || argv.length === 0
  return join(dirname(fileURLToPath(bundle)), 'code-cache', `${command}${help ? '-help' : ''}.bin`)
}

/**
 * Loads the bundle at `bundle` as a CommonJS module, compiled with the code cache in `cacheFile` when there is one
 * that V8 accepts. `save()` writes the cache of everything compiled so far when none was accepted (the first run of a
 * command, or a Node that rejects the cache); a folder that cannot be written only means no cache.
 * @param {URL} bundle the bundle's entry (a .cjs file)
 * @param {string} cacheFile where its code cache is kept
 * @returns {{ exports: Record<string, unknown>, cached: boolean, save: () => void }}
 * @example const cli = loadWithCodeCache(entry, codeCacheFile(entry, argv)); await cli.exports.main(argv); cli.save()
 */
export function loadWithCodeCache(bundle, cacheFile) {
  const filename = fileURLToPath(bundle)
  let cachedData
  try {
    cachedData = readFileSync(cacheFile)
  } catch {
    // No cache yet.
  }
  const source = readFileSync(filename, 'utf8')
  // No dynamic-import callback: under Node 20 one is lost with the code cache, so the build refuses any `import()`.
  const script = new Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, {
    filename,
    cachedData,
  })
  const module = { exports: {} }
  script.runInThisContext()(module.exports, createRequire(filename), module, filename, dirname(filename))
  const cached = cachedData !== undefined && !script.cachedDataRejected
  return {
    exports: module.exports,
    cached,
    save() {
      if (cached) return
      try {
        mkdirSync(dirname(cacheFile), { recursive: true })
        const partial = `${cacheFile}.${process.pid}.tmp`
        writeFileSync(partial, script.createCachedData())
        renameSync(partial, cacheFile)
      } catch {
        // A read-only install runs without a cache.
      }
    },
  }
}
