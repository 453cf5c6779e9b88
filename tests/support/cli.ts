import path from 'node:path'
import { main } from '../../offline/cli/index.ts'
import type { CliIo } from '../../offline/cli/program.ts'

/** `../shared/datasets`, beside the repository (where CI puts it too). */
export const SHARED_DATASETS = path.resolve(import.meta.dirname, '../../../shared/datasets')

/**
 * Runs `reward-harness <argv>` in this process and returns its exit code and what it printed.
 * @example const { code, out } = await runCli('bench', '--dataset', file, '--scorer', 'mock')
 */
export async function runCli(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = ''
  let err = ''
  const io: CliIo = { out: (text) => void (out += text), err: (text) => void (err += text) }
  const code = await main(argv, io)
  return { code, out, err }
}
