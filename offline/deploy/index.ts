/**
 * Deploying RM artifacts to the edge: the admin API client with retries on 429/503 (client), the deploy, rollback and
 * deployments flows with local validation first (run) and their text output (format). Their errors become exit codes
 * in offline/cli/failures.ts.
 */
export {
  AdminClient,
  DEFAULT_RETRY,
  DEFAULT_TIMEOUT_MS,
  DeploymentList,
  EdgeHttpError,
  EdgeNetworkError,
  EdgeProtocolError,
  RmHealth,
  UploadResult,
  type AdminClientOptions,
  type DeployLlm,
} from './client.ts'
export { formatDeploy, formatDeployments, formatRecord, shortId } from './format.ts'
export {
  ADMIN_TOKEN_ENV,
  checkTarget,
  checkUrl,
  connect,
  deployArtifact,
  deployedBy,
  listDeployments,
  llmOf,
  rollbackTarget,
  type DeployOutcome,
  type EdgeConnection,
} from './run.ts'
