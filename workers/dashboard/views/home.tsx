import type { FC } from 'hono/jsx'
import type { RunSummary } from '../data.ts'
import { formatTime, Layout, type ViewerInfo } from './layout.tsx'

/** Where a local admin token is: npm start writes it to .dev.vars and names the file, never printing the token. */
const LOCAL_TOKEN_HINT = " (npm start wrote it to .dev.vars: sed -n 's/^ADMIN_TOKEN=//p' .dev.vars prints it)"

/**
 * The runs index: every run the viewer may open, with its activity.
 * @example c.html(<HomePage viewer={viewer} runs={await visibleRuns(c.env, viewer.principal)} />)
 */
export const HomePage: FC<{ viewer: ViewerInfo; runs: RunSummary[] }> = ({ viewer, runs }) => (
  <Layout title="Runs" viewer={viewer}>
    <div class="page-head">
      <h1>Runs</h1>
      <span class="note">{runs.length === 1 ? '1 run' : `${runs.length} runs`} you can open</span>
    </div>
    <section class="card">
      {runs.length === 0 ? (
        <p class="empty">No run is visible to you. Log in with the admin token or a run token to see more.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th>Run</th>
              <th>Mode</th>
              <th>Rubrics</th>
              <th>Access</th>
              <th class="num">Scores</th>
              <th class="num">Last step</th>
              <th>Created (UTC)</th>
            </tr>
          </thead>
          <tbody>
            {runs.map((run) => (
              <tr>
                <td>
                  <a href={runHref(run.id)} data-run={run.id}>
                    <strong>{run.id}</strong>
                  </a>
                </td>
                <td>{run.mode}</td>
                <td>{run.rubrics_mode}</td>
                <td>
                  <span class={`pill ${run.access === 'open' ? 'warn' : 'info'}`}>{run.access}</span>
                </td>
                <td class="num">{run.scores}</td>
                <td class="num">{run.last_step ?? '—'}</td>
                <td>{run.created_at ? formatTime(run.created_at) : <span class="muted">config file</span>}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {viewer.principal.kind === 'anonymous' ? (
        <p class="note" data-hint="login">
          Runs created with POST /runs need a token: <a href="/dashboard/login">log in</a> with the admin token
          {viewer.local ? LOCAL_TOKEN_HINT : ''} to see every run, or with a run token to see that run.
        </p>
      ) : null}
    </section>
  </Layout>
)

/**
 * The dashboard address of a run.
 * @example runHref('grpo-1') // '/dashboard/runs/grpo-1'
 */
export function runHref(runId: string, query: Record<string, string | undefined> = {}): string {
  const params = new URLSearchParams(
    Object.entries(query).filter((entry): entry is [string, string] => entry[1] !== undefined && entry[1] !== ''),
  )
  const search = params.toString()
  return `/dashboard/runs/${encodeURIComponent(runId)}${search ? `?${search}` : ''}`
}
