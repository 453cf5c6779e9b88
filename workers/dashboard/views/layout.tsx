import type { Child, FC, PropsWithChildren } from 'hono/jsx'
import { raw } from 'hono/html'
import type { Principal } from '../../env.ts'
import { STYLES } from './styles.ts'

/** Who is looking, as the header says it (never the token itself). */
export interface ViewerInfo {
  principal: Principal
  /** True when the principal came from the login cookie, so a "Log out" button makes sense. */
  fromCookie: boolean
  /** `DEPLOYMENT=local`: the default run is open without a token. */
  local: boolean
}

/**
 * The page frame: header with navigation and who is signed in, then the page.
 * @example <Layout title="Runs" viewer={viewer}><h1>Runs</h1></Layout>
 */
export const Layout: FC<PropsWithChildren<{ title: string; viewer?: ViewerInfo; wide?: boolean }>> = ({
  title,
  viewer,
  wide,
  children,
}) => (
  <>
    {raw('<!doctype html>')}
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="referrer" content="no-referrer" />
        <title>{`${title} · Reward Harness`}</title>
        <style>{raw(STYLES)}</style>
      </head>
      <body>
        <header class="top">
          <a class="brand" href="/">
            <span class="logo" aria-hidden="true">
              ◆
            </span>{' '}
            Reward Harness
          </a>
          {viewer && (
            <nav class="top-nav">
              <a href="/">Runs</a>
              {canSeeTargets(viewer) && <a href="/dashboard/targets">Artifacts &amp; deployments</a>}
            </nav>
          )}
          {viewer && <Who viewer={viewer} />}
        </header>
        <main class={wide ? 'wide' : undefined}>{children}</main>
      </body>
    </html>
  </>
)

const Who: FC<{ viewer: ViewerInfo }> = ({ viewer }) => {
  const { principal } = viewer
  const label =
    principal.kind === 'admin'
      ? 'admin'
      : principal.kind === 'run'
        ? `run token · ${principal.runId}`
        : viewer.local
          ? 'local, no token'
          : 'not signed in'
  return (
    <div class="who">
      <span class={`pill ${principal.kind === 'anonymous' ? 'muted' : 'ok'}`}>{label}</span>
      {viewer.fromCookie ? (
        <form method="post" action="/dashboard/logout" class="inline">
          <button type="submit" class="link">
            Log out
          </button>
        </form>
      ) : (
        principal.kind === 'anonymous' && <a href="/dashboard/login">Log in</a>
      )}
    </div>
  )
}

/**
 * The targets page (artifacts and deployments, which belong to no run) is the admin's; locally anyone may look.
 * @example if (!canSeeTargets(viewer)) throw new AppError('forbidden', '…')
 */
export function canSeeTargets(viewer: ViewerInfo): boolean {
  return viewer.principal.kind === 'admin' || (viewer.local && viewer.principal.kind === 'anonymous')
}

/**
 * A section with an anchor and a heading.
 * @example <Section id="scores" title="Scores">…</Section>
 */
export const Section: FC<PropsWithChildren<{ id: string; title: string; note?: Child }>> = ({
  id,
  title,
  note,
  children,
}) => (
  <section id={id} class="card">
    <div class="card-head">
      <h2>{title}</h2>
      {note && <span class="note">{note}</span>}
    </div>
    {children}
  </section>
)

/**
 * An SVG chart built by `src/charts` (which escapes every text it draws), embedded as is.
 * @example <Chart svg={histogram({ title: 'Scores', values })} />
 */
export const Chart: FC<{ svg: string; caption?: string }> = ({ svg, caption }) => (
  <figure class="chart">
    {raw(svg)}
    {caption && <figcaption>{caption}</figcaption>}
  </figure>
)

/**
 * A date-time in UTC, short: `2026-11-22 09:14:03`.
 * @example formatTime('2026-11-22T09:14:03.120Z') // '2026-11-22 09:14:03'
 */
export function formatTime(iso: string | null | undefined): string {
  if (!iso) return '—'
  return iso.replace('T', ' ').replace(/\.\d+Z$|Z$/, '')
}

/**
 * A duration between two times, human-sized: `840 ms`, `12.4 s`, `3.1 min`.
 * @example formatDuration('2026-01-01T00:00:00Z', '2026-01-01T00:00:12.4Z') // '12.4 s'
 */
export function formatDuration(from: string | null, to: string | null): string {
  if (!from || !to) return '—'
  const ms = Date.parse(to) - Date.parse(from)
  if (!Number.isFinite(ms) || ms < 0) return '—'
  if (ms < 1_000) return `${ms} ms`
  if (ms < 120_000) return `${(ms / 1_000).toFixed(1)} s`
  return `${(ms / 60_000).toFixed(1)} min`
}

/**
 * A score with two decimals, or a dash.
 * @example formatScore(0.4567) // '0.46'
 */
export function formatScore(value: number | null | undefined): string {
  return value === null || value === undefined || !Number.isFinite(value) ? '—' : value.toFixed(2)
}
