/**
 * Deploying RM artifacts to the edge: the admin API client with retries on 429/503 (client), the deploy, rollback and
 * deployments flows with local validation first (run) and their text output (format). Their errors become exit codes
 * in offline/cli/failures.ts.
 */
export { AdminClient, DEFAULT_RETRY } from './client.ts'
export { EdgeHttpError, EdgeNetworkError, EdgeProtocolError } from './errors.ts'
export { formatDeployments } from './format.ts'
export {
  deployedBy,
  llmOf,
} from './run.ts'
