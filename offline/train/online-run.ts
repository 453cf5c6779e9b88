/**
 * The optional online run of a training run: its config file (`{config}`, `{run_id, config}` or a bare config) and
 * `POST /runs` with the admin token, whose answer carries the run token (shown once, so it goes to the env file only).
 */
import { z } from 'zod'
import { CreateRunRequest } from '../../src/schemas/run-config.ts'
import { EdgeHttpError, EdgeNetworkError, EdgeProtocolError } from '../deploy/errors.ts'
import { networkReason } from '../edge/index.ts'
import { readJsonFile } from '../lineage/backend.ts'
import { UsageError } from '../../src/usage-error/index.ts'

/** What `POST /runs` answers (201). */
export const CreatedRun = z.object({ run_id: z.string(), token: z.string().min(1), base_path: z.string() })
export type CreatedRun = z.infer<typeof CreatedRun>

/** The body of `POST /runs`: the config as the file gives it (the edge fills its defaults). */
export interface OnlineRunRequest {
  run_id: string
  config: unknown
}

/**
 * The request for `POST /runs` from a config file, checked here before any request: the file's `run_id` wins, else
 * `defaultRunId` (the training run's name).
 * @example const request = await readOnlineRunRequest('configs/online.json', 'grpo-7') // { run_id: 'grpo-7', config:
 *   {…} }
 */
export async function readOnlineRunRequest(file: string, defaultRunId: string): Promise<OnlineRunRequest> {
  const raw = await readJsonFile(file)
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw new UsageError(`--online-run ${file}: expected a JSON object (a run config, or {run_id?, config})`)
  // A run config has no run_id, so a file with one is the wrapped form even when its `config` key is misspelt.
  const wrapped = 'config' in raw || 'run_id' in raw
  const body: { run_id: unknown; config?: unknown } = wrapped
    ? { run_id: defaultRunId, ...raw }
    : { run_id: defaultRunId, config: raw }
  const parsed = CreateRunRequest.safeParse(body)
  if (!parsed.success) {
    const issues = parsed.error.issues.map((issue) => {
      const where = issue.path.join('.') || '(root)'
      const fromName = issue.path[0] === 'run_id' && !(wrapped && 'run_id' in raw)
      return fromName
        ? `run_id "${defaultRunId}" (from --name): ${issue.message}; give another --name or "run_id" in the file`
        : `${wrapped ? where : where.replace(/^config\.?/, '') || '(root)'}: ${issue.message}`
    })
    throw new UsageError(`--online-run ${file}: ${issues.join('; ')}`)
  }
  return { run_id: parsed.data.run_id ?? defaultRunId, config: body.config }
}

/**
 * Creates the online run (`POST <edge>/runs`, admin token). No retry: a run id is created once, and a repeat would
 * be answered 409 run_exists.
 * @example const { run_id, token } = await createOnlineRun('https://rm.example.com', adminToken, request)
 */
export async function createOnlineRun(
  baseUrl: string,
  adminToken: string,
  request: OnlineRunRequest,
  fetchImpl: typeof fetch = fetch,
): Promise<CreatedRun> {
  let response: Response
  let text: string
  try {
    response = await fetchImpl(`${baseUrl}/runs`, {
      method: 'POST',
      headers: {
        accept: 'application/json',
        'content-type': 'application/json',
        authorization: `Bearer ${adminToken}`,
      },
      body: JSON.stringify(request),
      signal: AbortSignal.timeout(30_000),
    })
    text = await response.text()
  } catch (error) {
    throw new EdgeNetworkError('POST', '/runs', networkReason(error, 30_000), baseUrl)
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  if (!response.ok) {
    const error = (json as { error?: { code?: unknown; message?: unknown; details?: unknown } } | undefined)?.error
    const code = typeof error?.code === 'string' ? error.code : `http_${response.status}`
    const message = typeof error?.message === 'string' ? error.message : text.trim().slice(0, 300)
    throw new EdgeHttpError('POST', '/runs', response.status, code, message, error?.details)
  }
  const parsed = CreatedRun.safeParse(json)
  if (!parsed.success)
    throw new EdgeProtocolError(
      'POST',
      '/runs',
      parsed.error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`).join('; '),
    )
  return parsed.data
}
