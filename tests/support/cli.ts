import path from 'node:path'
import { main } from '../../offline/cli/index.ts'
import type { CliIo } from '../../offline/cli/program.ts'

/** LLMBar's natural and adversarial-neighbor subsets, kept with the tests (tests/fixtures/llmbar). */
export const LLMBAR_FIXTURES = path.resolve(import.meta.dirname, '../fixtures/llmbar')

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
