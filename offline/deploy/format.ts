/** Text output of `deploy`, `rollback` and `deployments`: a record as a key/value block, a history as a table. */
import type { DeployRecord } from '../../src/schemas/artifact.ts'
import type { DeploymentList, UploadResult } from './client.ts'

/**
 * A short form of an artifact id for tables: `rm_` and the first 12 hex digits.
 * @example shortId('rm_0123456789abcdef…') // 'rm_0123456789ab…'
 */
function shortId(id: string | null): string {
  if (id === null) return '-'
  return /^rm_[0-9a-f]{64}$/.test(id) ? `${id.slice(0, 15)}…` : id
}

/**
 * One deploy record as aligned `key  value` lines, under a heading.
 * @example formatRecord(record, 'deployed rm_… to prod')
 */
export function formatRecord(record: DeployRecord, heading: string): string {
  const rows: Array<[string, string]> = [
    ['target', record.target],
    ['action', record.action],
    ['artifact', record.artifact_id],
    ['previous', record.previous_artifact_id ?? '(none)'],
    ['deployed_by', record.deployed_by],
    ['deployed_at', record.deployed_at],
    ['deploy_id', record.deploy_id],
    ['dataset', record.dataset_sha256],
    ['config_hash', record.config_hash],
  ]
  return [heading, ...rows.map(([key, value]) => `  ${key.padEnd(13)}${value}`)].join('\n')
}

/**
 * What `deploy` prints: whether the upload was new, then the record.
 * @example formatDeploy({ artifact_path: 'rm.json', upload, deployment })
 */
export function formatDeploy(outcome: {
  artifact_path: string
  converted_from?: { format: 'autosr'; artifact_id: string }
  dropped_credentials?: string[]
  upload: UploadResult
  deployment: DeployRecord
}): string {
  const { deployment, upload } = outcome
  const stored = upload.stored ? 'uploaded' : 'already stored at the edge'
  const converted = outcome.converted_from
    ? `, converted from autosr artifact ${outcome.converted_from.artifact_id}`
    : ''
  const source = `${outcome.artifact_path}${converted}, ${stored}`
  const dropped = outcome.dropped_credentials?.length
    ? `\n  credentials  removed before the upload, not sent: ${outcome.dropped_credentials.join(', ')}`
    : ''
  return (
    formatRecord(deployment, `deployed ${deployment.artifact_id} (${source}) to target ${deployment.target}`) + dropped
  )
}

/**
 * A target's history as a table, newest first; `*` marks the active deployment.
 * @example formatDeployments({ target: 'prod', active_artifact_id: 'rm_…', deployments: [record] })
 */
export function formatDeployments(list: DeploymentList): string {
  const heading =
    `target ${list.target}: ` +
    `${list.active_artifact_id ? `active ${list.active_artifact_id}` : 'no active artifact'}, ` +
    `${list.deployments.length} deployment${list.deployments.length === 1 ? '' : 's'}`
  if (list.deployments.length === 0) return heading
  const header = ['', 'deployed_at', 'action', 'artifact', 'previous', 'deployed_by', 'deploy_id']
  const rows = list.deployments.map((record, index) => [
    index === 0 && record.artifact_id === list.active_artifact_id ? '*' : '',
    record.deployed_at,
    record.action,
    shortId(record.artifact_id),
    shortId(record.previous_artifact_id),
    record.deployed_by,
    record.deploy_id,
  ])
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]!.length)))
  const line = (cells: string[]) =>
    cells
      .map((cell, column) => (column === cells.length - 1 ? cell : cell.padEnd(widths[column]!)))
      .join('  ')
      .trimEnd()
  return [heading, `  ${line(header)}`, ...rows.map((row) => `  ${line(row)}`)].join('\n')
}
