/** Files that are either the old or the new version, never half written: `write-file-atomic`, then a dir fsync. */
import { mkdir, open } from 'node:fs/promises'
import { dirname } from 'node:path'
import writeFileAtomically from 'write-file-atomic'

/**
 * Writes `data` to `file` atomically (temp file beside it, fsync, rename over the target), then fsyncs the directory
 * (best effort) so the rename itself survives a crash. Directories are created. `mode` applies to the new file
 * (e.g. 0o755 for a script).
 * @example await writeFileAtomic('out/best.json', JSON.stringify(output, null, 2) + '\n')
 */
export async function writeFileAtomic(file: string, data: string, options: { mode?: number } = {}): Promise<void> {
  await mkdir(dirname(file), { recursive: true })
  await writeFileAtomically(file, data, { mode: options.mode ?? 0o644, encoding: 'utf8' })
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
