/**
 * The env file `train prepare` writes and `train run | finalize | show` read: `KEY='value'` lines a shell can source
 * (`set -a; . ./train.env; set +a`), written with mode 0600 because it can hold a run token.
 */
import { chmodSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { UsageError } from '../../src/usage-error/index.ts'

/** The variables, by what they mean; the recipes in clients/python/recipes read the first three. */
export const ENV = {
  url: 'REWARD_HARNESS_URL',
  token: 'REWARD_HARNESS_TOKEN',
  target: 'REWARD_HARNESS_TARGET',
  runId: 'REWARD_HARNESS_RUN_ID',
  artifactId: 'REWARD_HARNESS_ARTIFACT_ID',
  deployId: 'REWARD_HARNESS_DEPLOY_ID',
  trainingRunId: 'REWARD_HARNESS_TRAINING_RUN_ID',
  lineageDb: 'REWARD_HARNESS_LINEAGE_DB',
  lineageUrl: 'REWARD_HARNESS_LINEAGE_URL',
} as const

/** What an env file holds, by variable name. */
export type TrainEnv = Record<string, string>

const KEY = /^[A-Za-z_][A-Za-z0-9_]*$/

/**
 * Quotes a value for a POSIX shell: single quotes, each `'` written as `'\''`.
 * @example shellQuote("it's") // "'it'\\''s'"
 */
function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`
}

/**
 * The file's text: a comment line, then one `KEY='value'` line per defined value, in the given order.
 * @example formatEnvFile({ REWARD_HARNESS_TARGET: 'prod' }) // "# written by …\nREWARD_HARNESS_TARGET='prod'\n"
 * @internal
 */
export function formatEnvFile(env: Record<string, string | undefined>): string {
  const lines = ['# written by `reward-harness train prepare`; it may hold a run token: keep it private (mode 600)']
  for (const [key, value] of Object.entries(env)) {
    if (value === undefined) continue
    if (!KEY.test(key)) throw new UsageError(`env file: "${key}" is not a variable name`)
    if (value.includes('\n') || value.includes('\0'))
      throw new UsageError(`env file: the value of ${key} has a line break`)
    lines.push(`${key}=${shellQuote(value)}`)
  }
  return `${lines.join('\n')}\n`
}

/**
 * Parses `KEY=value` lines (an optional `export `, `#` comments, values bare, '…' or "…" quoted, as a shell reads
 * them), so a file a user edited by hand still reads as their shell would.
 * @example parseEnvFile("A='x'\\''y'\nexport B=2") // { A: "x'y", B: '2' }
 * @internal
 */
export function parseEnvFile(text: string, file = 'env file'): TrainEnv {
  const env: TrainEnv = {}
  text.split(/\r?\n/).forEach((raw, index) => {
    const line = raw.trim()
    if (line === '' || line.startsWith('#')) return
    const match = line.match(/^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$/)
    if (!match) throw new UsageError(`${file}: line ${index + 1}: expected KEY=value`)
    env[match[1]!] = unquote(match[2]!, `${file}: line ${index + 1}`)
  })
  return env
}

function unquote(text: string, place: string): string {
  let value = ''
  for (let at = 0; at < text.length; ) {
    const char = text[at]!
    if (char === "'") {
      const end = text.indexOf("'", at + 1)
      if (end === -1) throw new UsageError(`${place}: unterminated '`)
      value += text.slice(at + 1, end)
      at = end + 1
    } else if (char === '"') {
      let end = at + 1
      for (; end < text.length && text[end] !== '"'; end++) {
        if (text[end] === '\\' && end + 1 < text.length) {
          value += text[end + 1]
          end++
        } else value += text[end]
      }
      if (end >= text.length) throw new UsageError(`${place}: unterminated "`)
      at = end + 1
    } else if (char === '\\' && at + 1 < text.length) {
      value += text[at + 1]
      at += 2
    } else if (/\s/.test(char)) {
      break
    } else {
      value += char
      at++
    }
  }
  return value
}

/**
 * Writes the env file with mode 0600, atomically (a reader never sees half a file, and a failure leaves the old one).
 * Returns a commit function, so the caller can write first (and fail early, before recording anything) and
 * publish only once the rest is done; `discard` removes the unpublished file.
 * @example const pending = stageEnvFile('train.env', env); await record(); pending.commit()
 */
export function stageEnvFile(
  file: string,
  env: Record<string, string | undefined>,
): { commit(): void; discard(): void } {
  const staged = path.join(path.dirname(path.resolve(file)), `.${path.basename(file)}.${process.pid}.tmp`)
  try {
    writeFileSync(staged, formatEnvFile(env), { mode: 0o600 })
    chmodSync(staged, 0o600)
  } catch (error) {
    rmSync(staged, { force: true })
    throw new UsageError(`--env-path ${file}: cannot write it: ${(error as Error).message}`)
  }
  return {
    commit: () => renameSync(staged, file),
    discard: () => rmSync(staged, { force: true }),
  }
}

/**
 * Reads an env file written by `train prepare`; exit 2 when it is missing or lacks the training run id.
 * @example const env = readEnvFile('train.env'); env.REWARD_HARNESS_TRAINING_RUN_ID
 */
export function readEnvFile(file: string): TrainEnv {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (error) {
    throw new UsageError(
      `cannot read the env file ${file}: ${(error as Error).message} (write it with \`reward-harness train prepare\`)`,
    )
  }
  const env = parseEnvFile(text, file)
  if (!env[ENV.trainingRunId])
    throw new UsageError(
      `${file} has no ${ENV.trainingRunId}: is it an env file written by \`reward-harness train prepare\`?`,
    )
  return env
}
