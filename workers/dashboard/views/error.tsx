import type { FC } from 'hono/jsx'
import { Layout, type ViewerInfo } from './layout.tsx'

/**
 * An error as a page: the status, the machine-readable code, the message, and the request id to quote.
 * @example c.html(<ErrorPage status={404} code="run_not_found" message="…" requestId={id} />, 404)
 */
export const ErrorPage: FC<{
  status: number
  code: string
  message: string
  requestId: string
  viewer?: ViewerInfo
}> = ({ status, code, message, requestId, viewer }) => (
  <Layout title={`${status} ${code}`} viewer={viewer}>
    <section class="card">
      <h1>
        {status} · <code>{code}</code>
      </h1>
      <p>{message}</p>
      <p class="note">
        Request id <code>{requestId}</code> · <a href="/">back to the runs</a>
      </p>
    </section>
  </Layout>
)
