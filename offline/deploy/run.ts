/**
 * The flows behind `reward-harness deploy | rollback | deployments`: read the admin token and the target, validate the
 * artifact locally (schema and content address) before anything goes over the network, upload it, activate it.
 */
import { userInfo } from 'node:os'
import type { StructuredOutput } from '../../src/schemas/structured-output.ts'
import { TargetName, type DeployRecord } from '../../src/schemas/artifact.ts'
import { readDeployableArtifact } from '../artifacts/autosr-import.ts'
import {
  AdminClient,
  type AdminClientOptions,
  type DeployLlm,
  type DeploymentList,
  type UploadResult,
} from './client.ts'
import { UsageError } from '../../src/usage-error/index.ts'
import { requireAdminToken } from '../edge/index.ts'

/** Where the admin API is and who is calling it. */
export interface EdgeConnection {
  url: string
  env: Record<string, string | undefined>
  /** Client overrides (tests: fetch, sleep, retry). */
  client?: Partial<Omit<AdminClientOptions, 'baseUrl' | 'token'>>
}

/** What `deploy` did. */
export interface DeployOutcome {
  artifact_path: string
  /** Set when the file was an autosr artifact, converted as `import --from autosr` converts it before the upload. */
  converted_from?: { format: 'autosr'; artifact_id: string }
  /** Where credentials were removed before the upload (paths, never values). */
  dropped_credentials: string[]
  upload: UploadResult
  deployment: DeployRecord
}

/**
 * The admin client for a URL, with the token `requireAdminToken` finds (the environment, or `.dev.vars` for a server
 * on this machine); UsageError when either is unusable.
 * @example const client = connect({ url: 'http://127.0.0.1:8787', env: process.env })
 */
export function connect(connection: EdgeConnection): AdminClient {
  const baseUrl = checkUrl(connection.url, '--url')
  return new AdminClient({ ...connection.client, baseUrl, token: requireAdminToken(baseUrl, connection.env) })
}

/**
 * Checks a target name (a path segment of `/rm/<target>/…`).
 * @example checkTarget('prod') // 'prod'
 */
export function checkTarget(target: string): string {
  const parsed = TargetName.safeParse(target)
  if (!parsed.success)
    throw new UsageError(`--target "${target}": ${parsed.error.issues[0]?.message ?? 'invalid target'}`)
  return parsed.data
}

/**
 * Checks an http(s) URL given by a flag and returns it without a trailing slash.
 * @example checkUrl('http://127.0.0.1:8787/', '--url') // 'http://127.0.0.1:8787'
 */
export function checkUrl(value: string, flag: string): string {
  let url: URL
  try {
    url = new URL(value)
  } catch {
    throw new UsageError(`${flag} "${value}": not a URL (e.g. https://rm.example.com)`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new UsageError(`${flag} "${value}": expected an http or https URL`)
  return value.replace(/\/+$/, '')
}

/**
 * The `llm` of a deploy request from the `--llm-*` flags: none without `--llm-base-url`; the model and key variable
 * need the base URL.
 * @example llmOf({ llmBaseUrl: 'https://api.openai.com/v1', llmModel: 'gpt-4o-mini', llmApiKeyEnv: 'OPENAI_API_KEY' })
 */
export function llmOf(options: {
  llmBaseUrl?: string
  llmModel?: string
  llmApiKeyEnv?: string
  llmStructuredOutput?: StructuredOutput
}): DeployLlm | undefined {
  if (options.llmBaseUrl === undefined) {
    const stray =
      options.llmModel !== undefined
        ? '--llm-model'
        : options.llmApiKeyEnv !== undefined
          ? '--llm-api-key-env'
          : options.llmStructuredOutput !== undefined
            ? '--llm-structured-output'
            : undefined
    if (stray) throw new UsageError(`${stray} needs --llm-base-url`)
    return undefined
  }
  if (options.llmApiKeyEnv !== undefined && !/^[A-Za-z_][A-Za-z0-9_]*$/.test(options.llmApiKeyEnv)) {
    throw new UsageError(
      `--llm-api-key-env "${options.llmApiKeyEnv}": expected the name of an environment variable (letters, digits, ` +
        `_), not a key`,
    )
  }
  if (options.llmModel !== undefined && options.llmModel.trim() === '')
    throw new UsageError('--llm-model: expected a model name')
  return {
    base_url: checkUrl(options.llmBaseUrl, '--llm-base-url'),
    ...(options.llmModel === undefined ? {} : { model: options.llmModel }),
    ...(options.llmApiKeyEnv === undefined ? {} : { api_key_env: options.llmApiKeyEnv }),
    ...(options.llmStructuredOutput === undefined ? {} : { structured_output: options.llmStructuredOutput }),
  }
}

/**
 * Who a deployment is by: the flag, else `$USER` / `$USERNAME`, else the account running the CLI (containers often
 * set no `$USER`), else none (the edge decides).
 * @example deployedBy(undefined, { USER: 'alice' }) // 'alice'
 */
export function deployedBy(flag: string | undefined, env: Record<string, string | undefined>): string | undefined {
  return [flag, env.USER, env.USERNAME].map((name) => name?.trim()).find(Boolean) ?? accountName()
}

function accountName(): string | undefined {
  try {
    return userInfo().username.trim() || undefined
  } catch {
    return undefined
  }
}

/**
 * Validates the artifact file locally (an autosr artifact is converted first, as `import --from autosr` does), uploads
 * it and activates it on the target.
 * @example const { deployment } = await deployArtifact({ artifact: 'out/rm.json', target: 'prod', url, env: process.env
 *   })
 */
export async function deployArtifact(
  options: EdgeConnection & { artifact: string; target: string; deployedBy?: string; llm?: DeployLlm },
): Promise<DeployOutcome> {
  const target = checkTarget(options.target)
  const { artifact, converted_from, dropped_credentials } = await readDeployableArtifact(options.artifact)
  const client = connect(options)
  const upload = await client.uploadArtifact(artifact)
  const deployment = await client.deploy(target, {
    artifact_id: artifact.artifact_id,
    ...(options.deployedBy === undefined ? {} : { deployed_by: options.deployedBy }),
    ...(options.llm === undefined ? {} : { llm: options.llm }),
  })
  return {
    artifact_path: options.artifact,
    ...(converted_from ? { converted_from } : {}),
    dropped_credentials,
    upload,
    deployment,
  }
}

/**
 * Rolls a target back to the artifact its active deployment replaced.
 * @example const record = await rollbackTarget({ target: 'prod', url, env: process.env })
 */
export async function rollbackTarget(
  options: EdgeConnection & { target: string; deployedBy?: string },
): Promise<DeployRecord> {
  const target = checkTarget(options.target)
  return connect(options).rollback(target, options.deployedBy === undefined ? {} : { deployed_by: options.deployedBy })
}

/**
 * A target's deployments, newest first.
 * @example const { active_artifact_id, deployments } = await listDeployments({ target: 'prod', url, env: process.env })
 */
export async function listDeployments(options: EdgeConnection & { target: string }): Promise<DeploymentList> {
  const target = checkTarget(options.target)
  return connect(options).deployments(target)
}
