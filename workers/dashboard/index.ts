/**
 * The edge dashboard (server-rendered Hono JSX, no client script): `GET /` lists runs for a browser (JSON for API
 * clients); `/dashboard/runs/:runId` shows a run's timeline, scores, rubric versions with diffs, reward-hacking
 * flags and memory; `/dashboard/targets` the artifacts and deployments; `/dashboard/login` keeps a token in an
 * HttpOnly cookie.
 */
export { dashboardRoutes } from './routes.tsx'
