import type { FC } from 'hono/jsx'
import type { ArtifactSummary, TargetSummary } from '../data.ts'
import { formatTime, Layout, Section, type ViewerInfo } from './layout.tsx'

/**
 * Artifacts and deployments per target: each target's active artifact and its recent deploys and rollbacks, then
 * every stored artifact.
 * @example c.html(<TargetsPage viewer={viewer} {...await loadTargets(c.env.DB)} />)
 */
export const TargetsPage: FC<{ viewer: ViewerInfo; targets: TargetSummary[]; artifacts: ArtifactSummary[] }> = ({
  viewer,
  targets,
  artifacts,
}) => (
  <Layout title="Artifacts & deployments" viewer={viewer}>
    <div class="page-head">
      <h1>Artifacts &amp; deployments</h1>
      <span class="note">
        {targets.length} targets · {artifacts.length} artifacts stored
      </span>
    </div>
    <Section
      id="targets"
      title="Deploy targets"
      note="served at /rm/<target>/…; the newest record of a target is active"
    >
      {targets.length === 0 ? (
        <p class="empty">Nothing has been deployed yet (reward-harness deploy --target T).</p>
      ) : (
        targets.map((target) => <TargetCard target={target} />)
      )}
    </Section>
    <Section id="artifacts" title="Stored artifacts" note="content-addressed: the id is the sha256 of the artifact">
      {artifacts.length === 0 ? (
        <p class="empty">No artifact stored (reward-harness export, then deploy).</p>
      ) : (
        <ArtifactsTable artifacts={artifacts} />
      )}
    </Section>
  </Layout>
)

/** One deploy target: its active artifact, then its deploys and rollbacks, newest first. */
const TargetCard: FC<{ target: TargetSummary }> = ({ target }) => (
  <div class="version changed" data-target={target.target}>
    <div class="version-head">
      <h3>
        <code>{target.target}</code>
      </h3>
      <span class="pill ok">active</span>
      <code title={target.active.artifact_id}>{shortId(target.active.artifact_id)}</code>
      <span class="note">
        {target.active.action} by {target.active.deployed_by} at {formatTime(target.active.deployed_at)}
      </span>
    </div>
    <table>
      <thead>
        <tr>
          <th>Deployed (UTC)</th>
          <th>Action</th>
          <th>Artifact</th>
          <th>Previous</th>
          <th>By</th>
          <th>Model</th>
        </tr>
      </thead>
      <tbody>
        {target.history.map((row) => (
          <tr>
            <td>{formatTime(row.deployed_at)}</td>
            <td>
              <span class={`pill ${row.action === 'rollback' ? 'warn' : 'info'}`}>{row.action}</span>
            </td>
            <td>
              <code title={row.artifact_id}>{shortId(row.artifact_id)}</code>
            </td>
            <td>
              {row.previous_artifact_id ? (
                <code title={row.previous_artifact_id}>{shortId(row.previous_artifact_id)}</code>
              ) : (
                '—'
              )}
            </td>
            <td>{row.deployed_by}</td>
            <td>{row.llm_model ?? '—'}</td>
          </tr>
        ))}
      </tbody>
    </table>
  </div>
)

/** Every stored artifact, with where it came from. */
const ArtifactsTable: FC<{ artifacts: ArtifactSummary[] }> = ({ artifacts }) => (
  <table>
    <thead>
      <tr>
        <th>Artifact</th>
        <th>Kind</th>
        <th>Contents</th>
        <th>Backend</th>
        <th>Source run</th>
        <th>Dataset</th>
        <th>Created (UTC)</th>
        <th>Stored (UTC)</th>
      </tr>
    </thead>
    <tbody>
      {artifacts.map((artifact) => (
        <tr data-artifact={artifact.id}>
          <td>
            <code title={artifact.id}>{shortId(artifact.id)}</code>
          </td>
          <td>{artifact.kind}</td>
          <td>{artifact.contents}</td>
          <td>{artifact.backend}</td>
          <td>{artifact.source_run_id}</td>
          <td>
            <code title={artifact.dataset_sha256}>{artifact.dataset_sha256.slice(0, 12)}</code>
          </td>
          <td>{formatTime(artifact.created_at_utc)}</td>
          <td>{formatTime(artifact.stored_at)}</td>
        </tr>
      ))}
    </tbody>
  </table>
)

/** `rm_<64 hex>` shortened for tables; the full id is in the title attribute. */
function shortId(id: string): string {
  return id.length > 20 ? `${id.slice(0, 15)}…${id.slice(-4)}` : id
}
