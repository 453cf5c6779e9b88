/**
 * The one place Durable Object names are built: every name carries its run id, so runs never share state.
 * @example coordinatorName('default') // 'run:default'
 */
export function coordinatorName(runId: string): string {
  return `run:${runId}`
}

/**
 * @example instanceName('default', 'global') // 'run:default:inst:global'
 */
export function instanceName(runId: string, instanceId: string): string {
  return `run:${runId}:inst:${instanceId}`
}

/**
 * @example memoryIndexName('default') // 'run:default:memory'
 */
export function memoryIndexName(runId: string): string {
  return `run:${runId}:memory`
}
