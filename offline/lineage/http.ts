/** The lineage API of an edge (`/lineage/*`) as a LineageBackend, authenticated with the admin token. */
import type { LineageBackend } from '../../src/lineage/compare.ts'
import type { LineageChain, RunFilter, RunSummary } from '../../src/lineage/schemas.ts'
import type { RecordOutcome } from '../../src/lineage/store.ts'
import { EdgeNetworkError } from '../deploy/errors.ts'
import { networkReason } from '../edge/index.ts'

/** An edge answer other than 2xx: `status` 4xx is refused input (exit 2), anything else a failure (exit 1). */
export class EdgeLineageError extends Error {
  override name = 'EdgeLineageError'
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message)
  }
}

/**
 * A backend calling `<url>/lineage/…` with `Authorization: Bearer <token>`.
 * @example const backend = edgeLineage('https://rm.example.com', process.env.REWARD_HARNESS_ADMIN_TOKEN!)
 */
export function edgeLineage(url: string, token: string, fetchImpl: typeof fetch = fetch): LineageBackend {
  const base = url.replace(/\/+$/, '')
  async function request<T>(method: string, path: string, body?: unknown, allow404 = false): Promise<T | undefined> {
    let response: Response
    try {
      response = await fetchImpl(`${base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      })
    } catch (error) {
      throw new EdgeNetworkError(method, path, networkReason(error), base)
    }
    const text = await response.text()
    if (allow404 && response.status === 404) return undefined
    if (!response.ok) {
      let message = text
      try {
        message = (JSON.parse(text) as { error?: { message?: string } }).error?.message ?? text
      } catch {
        /* not JSON */
      }
      throw new EdgeLineageError(response.status, `${method} ${path}: ${response.status} ${message}`)
    }
    return JSON.parse(text) as T
  }
  return {
    recordManifest: async (manifest) => (await request<RecordOutcome>('POST', '/lineage/manifests', manifest))!,
    recordResult: async (result) => (await request<RecordOutcome>('POST', '/lineage/results', result))!,
    recordEval: async (report) => (await request<RecordOutcome>('POST', '/lineage/evals', report))!,
    chain: (runId) => request<LineageChain>('GET', `/lineage/runs/${encodeURIComponent(runId)}`, undefined, true),
    listRuns: async (filter: RunFilter = {}) => {
      const query = new URLSearchParams(
        Object.entries(filter)
          .filter(([, value]) => value !== undefined)
          .map(([key, value]): [string, string] => [key, String(value)]),
      )
      return (await request<{ runs: RunSummary[] }>('GET', `/lineage/runs?${query}`))!.runs
    },
  }
}
