/**
 * A git revision checked out beside this tree, so a bench can measure it and this tree in the same run
 * (`--before <rev>` of bench/judge.ts and bench/search-cpu.ts).
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../', import.meta.url))

/**
 * A detached `git worktree` of `rev` in a temporary folder, sharing this checkout's node_modules, and how to remove it.
 * @example const before = checkoutRevision('5cf592e', 'bench-search-') // then before.root; finally before.remove()
 */
export function checkoutRevision(rev: string, prefix: string): { root: string; remove: () => void } {
  const root = mkdtempSync(join(tmpdir(), prefix))
  execFileSync('git', ['-C', ROOT, 'worktree', 'add', '--detach', '--quiet', root, rev], { stdio: 'inherit' })
  symlinkSync(join(ROOT, 'node_modules'), join(root, 'node_modules'), 'dir')
  return {
    root,
    remove: () => {
      execFileSync('git', ['-C', ROOT, 'worktree', 'remove', '--force', root])
      rmSync(root, { recursive: true, force: true })
    },
  }
}
