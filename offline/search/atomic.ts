/** Files that are either the old or the new version, never half written: temp file, fsync, rename. */
import { randomBytes } from 'node:crypto'
import { mkdir, open, rename, unlink } from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'

/**
 * The temp file a write goes through: hidden, next to the target (same file system, so the rename is
 * atomic), and never matching the target's own naming pattern (it starts with a dot and ends in `.tmp`).
 * @example tempPathFor('/out/best.json') // '/out/.best.json.4242.9f2c01ab.tmp'
 */
export function tempPathFor(file: string): string {
  return join(dirname(file), `.${basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`)
}

/**
 * Writes `data` to `file` atomically: a temp file in the same directory, fsync, rename over the target,
 * then an fsync of the directory (best effort), so a crash leaves the old file or the new one.
 * Directories are created. `mode` applies to the new file (e.g. 0o755 for a script).
 * @example await writeFileAtomic('out/best.json', JSON.stringify(output, null, 2) + '\n')
 */
export async function writeFileAtomic(file: string, data: string, options: { mode?: number } = {}): Promise<void> {
  await mkdir(dirname(file), { recursive: true })
  const temp = tempPathFor(file)
  const mode = options.mode ?? 0o644
  try {
    const handle = await open(temp, 'wx', mode)
    try {
      await handle.writeFile(data, 'utf8')
      // open() applies the umask; a script must end up executable whatever it is.
      await handle.chmod(mode)
      await handle.sync()
    } finally {
      await handle.close()
    }
    await rename(temp, file)
  } catch (error) {
    await unlink(temp).catch(() => undefined)
    throw error
  }
  await syncDirectory(dirname(file))
}

async function syncDirectory(directory: string): Promise<void> {
  try {
    const handle = await open(directory, 'r')
    try {
      await handle.sync()
    } finally {
      await handle.close()
    }
  } catch {
    // Some file systems refuse fsync on a directory; the rename is still atomic.
  }
}
