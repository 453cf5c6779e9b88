/**
 * The options of `reward-harness simulate`, validated from the flags commander parsed, and where the admin token
 * for `--create-run` comes from.
 */
import { UsageError } from '../../src/usage-error/index.ts'
import type { StructuredOutput } from '../../src/schemas/structured-output.ts'
import type { JudgeSettings } from './scenario.ts'

/** Validated options of one simulation. */
export interface SimulateOptions {
  url: string
  token?: string
  runId?: string
  createRun: boolean
  /** The created run archives its scored rollouts. */
  archive: boolean
  adminToken?: string
  judge: JudgeSettings
  steps: number
  rolloutsPerStep: number
  groupSize: number
  concurrency: number
  seed: number
  wait: boolean
  waitTimeoutS: number
  json: boolean
  out?: string
  /** `--questions`: a chosen/rejected JSONL with references whose prompts and answers the rollouts use. */
  questions?: string
}

/** The flags as commander hands them over (strings, booleans, `wait` false for `--no-wait`). */
export type SimulateFlags = Record<string, string | boolean | undefined>

/**
 * Validates the flags (environment fallbacks come from `env`); a wrong value is a UsageError naming its flag.
 * @example simulateOptions({ steps: '3', createRun: true }, {}).steps // 3
 */
export function simulateOptions(flags: SimulateFlags, env: Record<string, string | undefined>): SimulateOptions {
  const text = (name: string) => (typeof flags[name] === 'string' ? (flags[name] as string) : undefined)
  const integer = (name: string, flag: string, fallback: number, min: number, max: number) =>
    integerFlag(text(name), flag, fallback, min, max)
  const url = text('url') ?? `http://127.0.0.1:${env.PORT ?? '8787'}`
  if (!/^https?:\/\/[^/]/.test(url)) throw new UsageError(`--url must be an http(s) URL (got "${url}")`)
  const runId = text('runId')
  if (runId !== undefined && !/^[a-z0-9][a-z0-9_-]{0,63}$/.test(runId))
    throw new UsageError('--run-id may hold lower-case letters, digits, _ and - (at most 64)')
  const createRun = flags.createRun === true
  const judging = text('judging')
  if (judging !== undefined && judging !== 'grades' && judging !== 'verdicts')
    throw new UsageError(`--judging must be grades or verdicts (got "${judging}")`)
  const judge: JudgeSettings = {
    ...judgeSettings(
      text('judgeBaseUrl'),
      text('judgeModel'),
      text('judgeApiKeyEnv'),
      text('judgeStructuredOutput') as StructuredOutput | undefined,
    ),
    ...(judging ? { judging } : {}),
    ...(text('judgeConcurrency') ? { concurrency: integer('judgeConcurrency', 'judge-concurrency', 1, 1, 64) } : {}),
    ...(text('judgeTimeoutMs')
      ? { timeoutMs: integer('judgeTimeoutMs', 'judge-timeout-ms', 60_000, 1_000, 600_000) }
      : {}),
  }
  checkRunCreationFlags(createRun, judge, flags.archive === true)
  if (judge.baseUrl && !/^https?:\/\/[^/]/.test(judge.baseUrl))
    throw new UsageError('--judge-base-url must be an http(s) URL')
  const token = text('token') ?? env.REWARD_HARNESS_TOKEN
  return {
    url,
    ...(token ? { token } : {}),
    ...(runId ? { runId } : {}),
    createRun,
    archive: flags.archive === true,
    ...(text('adminToken') ? { adminToken: text('adminToken')! } : {}),
    judge,
    steps: integer('steps', 'steps', 5, 1, 10_000),
    rolloutsPerStep: integer('rolloutsPerStep', 'rollouts-per-step', 16, 1, 10_000),
    groupSize: integer('groupSize', 'group-size', 1, 1, 1_024),
    concurrency: integer('concurrency', 'concurrency', 8, 1, 256),
    seed: integer('seed', 'seed', 1, 0, 2 ** 31 - 1),
    wait: flags.wait !== false,
    waitTimeoutS: integer('waitTimeout', 'wait-timeout', 300, 1, 3_600),
    json: flags.json === true,
    ...(text('out') ? { out: text('out')! } : {}),
    ...(text('questions') ? { questions: text('questions')! } : {}),
  }
}

function integerFlag(raw: string | undefined, flag: string, fallback: number, min: number, max: number): number {
  if (raw === undefined) return fallback
  const value = Number(raw)
  if (!Number.isInteger(value) || value < min || value > max)
    throw new UsageError(`--${flag} must be an integer from ${min} to ${max} (got "${raw}")`)
  return value
}

function judgeSettings(
  baseUrl?: string,
  model?: string,
  apiKeyEnv?: string,
  structuredOutput?: StructuredOutput,
): JudgeSettings {
  return {
    ...(baseUrl ? { baseUrl } : {}),
    ...(model ? { model } : {}),
    ...(apiKeyEnv ? { apiKeyEnv } : {}),
    ...(structuredOutput ? { structuredOutput } : {}),
  }
}

/** The judge and archive flags configure the created run, so they make no sense without `--create-run`. */
function checkRunCreationFlags(createRun: boolean, judge: JudgeSettings, archive: boolean): void {
  if (createRun) return
  if (Object.keys(judge).length > 0)
    throw new UsageError('--judge-* and --judging flags configure the run created by --create-run; add --create-run')
  if (archive) throw new UsageError('--archive configures the run created by --create-run; add --create-run')
}
