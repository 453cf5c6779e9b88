import { execFile } from 'node:child_process'
import path from 'node:path'

/** The repository root, where child processes run. */
export const ROOT = path.resolve(import.meta.dirname, '../..')
/** The `reward-harness` bin, as `./reward-harness` runs it in a clone. */
const BIN = path.join(ROOT, 'reward-harness')

/** How a child process ended: its exit code and everything it printed. */
export interface ChildRun {
  code: number
  out: string
  err: string
}

/**
 * Runs a command to completion in the repository root with this process's environment, `env` laid over it (an
 * `undefined` value removes a variable) and NO_COLOR set; never rejects on a non-zero exit.
 * @example const { code, out } = await runChild('python3', ['-c', 'print(1)'], { RM_TOKEN: undefined })
 */
export function runChild(
  command: string,
  args: readonly string[],
  env: Record<string, string | undefined> = {},
  timeoutMs = 120_000,
): Promise<ChildRun> {
  const merged: Record<string, string | undefined> = { ...process.env, NO_COLOR: '1', ...env }
  for (const [key, value] of Object.entries(merged)) if (value === undefined) delete merged[key]
  return new Promise((resolve) => {
    execFile(
      command,
      [...args],
      { cwd: ROOT, env: merged as NodeJS.ProcessEnv, maxBuffer: 64 * 1024 * 1024, timeout: timeoutMs },
      (error, out, err) => resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, out, err }),
    )
  })
}

/**
 * `reward-harness <args>` as a child process, as a user runs it.
 * @example const listed = await runRewardHarness(['deployments', '--url', base], { REWARD_HARNESS_ADMIN_TOKEN: token })
 */
export function runRewardHarness(
  args: readonly string[],
  env: Record<string, string | undefined> = {},
  timeoutMs?: number,
): Promise<ChildRun> {
  return runChild(process.execPath, [BIN, ...args], env, timeoutMs)
}
