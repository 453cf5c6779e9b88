/**
 * What `GET /` tells a client that did not ask for HTML (API clients send `accept: application/json` or nothing): every
 * route, as the route-table test checks against the router. The 404 handler suggests the nearest of them.
 * @example c.json(SERVICE_INDEX)
 */
export const SERVICE_INDEX = {
  service: 'reward-harness',
  dashboard: 'GET / with Accept: text/html (a browser) opens the dashboard',
  /** A run's routes: at `/` for the caller's run (else the default run) and under `/runs/<run id>/`. */
  run_endpoints: [
    'POST /score',
    'POST /score/batch',
    'POST /score/group',
    'POST /complete',
    'GET /rubric_status',
    'GET /rubric_status/wait',
    'GET /llm_calls',
    'GET /rubrics',
    'GET /rubrics/history',
    'GET /rubrics/stats',
    'GET /memory',
    'GET /run',
    'GET /archive',
    'POST /compat/openrlhf',
    'POST /compat/slime',
    'GET /v1/models',
    'POST /v1/chat/completions',
  ],
  endpoints: [
    'GET /healthz',
    'GET /healthz/deep',
    'POST /runs',
    'POST /runs/:runId/tokens',
    'GET /runs/:runId/tokens',
    'DELETE /runs/:runId/tokens/:ref',
    'POST /admin/artifacts',
    'GET /admin/artifacts/:artifactId',
    'POST /admin/targets/:target/deployments',
    'GET /admin/targets/:target/deployments',
    'POST /admin/targets/:target/rollback',
    'POST /lineage/manifests',
    'POST /lineage/results',
    'POST /lineage/evals',
    'GET /lineage/runs/:id',
    'GET /lineage/runs',
    'GET /rm/:target/healthz',
    'POST /rm/:target/score',
    'POST /rm/:target/batch_score',
    'GET /rm/:target/v1/models',
    'POST /rm/:target/v1/chat/completions',
  ],
}
