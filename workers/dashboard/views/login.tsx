import type { FC } from 'hono/jsx'
import { Layout } from './layout.tsx'

/**
 * The login form: the token is posted once and never kept by the browser nor written back into a page; the cookie
 * holds a signed session id.
 * @example c.html(<LoginPage next="/dashboard/runs/grpo-1" message="Log in to see this run." />, 401)
 */
export const LoginPage: FC<{ next: string; message?: string; error?: string }> = ({ next, message, error }) => (
  <Layout title="Log in">
    <section class="card login">
      <h1>Log in</h1>
      <p class="muted">{message ?? 'The dashboard needs the admin token or a run token.'}</p>
      {error && (
        <p class="alert" role="alert">
          {error}
        </p>
      )}
      <form method="post" action="/dashboard/login">
        <label for="token">Token</label>
        <input id="token" name="token" type="password" autocomplete="off" required autofocus />
        <input type="hidden" name="next" value={next} />
        <button type="submit">Open the dashboard</button>
      </form>
      <p class="note">
        The token is checked once and not kept: this browser gets only a session id, in an HttpOnly, SameSite=Strict
        cookie, for 8 hours or until you log out. A run token shows its own run; the admin token shows every run, the
        artifacts and the deployments.
      </p>
    </section>
  </Layout>
)
