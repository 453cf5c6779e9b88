/**
 * `tsx offline/dev/keep-native-build.ts` (CI runs it after `npm ci`): puts the better-sqlite3 addon that `npm ci`
 * compiled into npm's prebuild cache (`<npm cache>/_prebuilds`), under the name prebuild-install looks for before it
 * downloads. No prebuilt binary can be downloaded here (GitHub is out of reach), so without it every later install on
 * this machine compiles SQLite again (3–7 minutes on two cores): the pack check's install of the tarball, and the next
 * CI run's `npm ci`. prebuild-install unpacks the cached file and loads the addon before it accepts it, so a file that
 * does not fit this Node falls back to the compile.
 */
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'

const require = createRequire(import.meta.url)
const util = require('prebuild-install/util') as {
  getDownloadUrl(opts: Record<string, unknown>): string
  cachedPrebuild(url: string): string
}
const packageDir = dirname(require.resolve('better-sqlite3/package.json'))
const pkg = require('better-sqlite3/package.json') as Record<string, unknown>
const addon = 'build/Release/better_sqlite3.node'

if (!existsSync(join(packageDir, addon))) {
  console.log(`keep-native-build: no ${addon} in ${packageDir}; nothing to keep`)
} else {
  const url = util.getDownloadUrl({
    pkg,
    runtime: 'node',
    abi: process.versions.modules,
    platform: process.platform,
    arch: process.arch,
    libc: '',
    'tag-prefix': 'v',
  })
  const cached = util.cachedPrebuild(url)
  if (existsSync(cached)) {
    console.log(`keep-native-build: ${cached} is kept already`)
  } else {
    mkdirSync(dirname(cached), { recursive: true })
    execFileSync('tar', ['-czf', cached, '-C', packageDir, addon])
    console.log(`keep-native-build: better-sqlite3's addon kept as ${cached}, for the installs after this one`)
  }
}
