/**
 * How a person runs this CLI again, for the commands it prints (resume, next step) and the replay scripts it writes.
 */
import { existsSync } from 'node:fs'
import { isAbsolute, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The folder holding the `reward-harness` bin: a clone's root, or the installed package's. */
const PACKAGE_ROOT = fileURLToPath(new URL('../../', import.meta.url))

/**
 * The command that runs this CLI from `cwd`: `reward-harness` where npm installed the package (it linked the bin
 * onto PATH), else the clone's bin by its path (`./reward-harness` from the clone's root).
 * @example cliCommand('/repo') // './reward-harness' in a clone at /repo; 'reward-harness' when installed
 */
export function cliCommand(cwd: string = process.cwd(), root: string = PACKAGE_ROOT): string {
  if (!existsSync(join(root, 'offline'))) return 'reward-harness'
  const bin = relative(cwd, join(root, 'reward-harness'))
  return bin.startsWith('..') || isAbsolute(bin) ? bin : `./${bin}`
}
