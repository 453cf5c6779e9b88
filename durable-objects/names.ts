import { fnv1a, mix32 } from '../src/hash/index.ts'

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
 * @example ledgerName('default', 'global', 3) // 'run:default:inst:global:ledger:3'
 */
export function ledgerName(runId: string, instanceId: string, shard: number): string {
  return `run:${runId}:inst:${instanceId}:ledger:${shard}`
}

/**
 * The ledger shard a rollout id belongs to: a hash of the id, so every request for one rollout meets the same shard.
 * @example ledgerShardOf('r17', 8) // 0..7
 */
export function ledgerShardOf(rolloutId: string, shards: number): number {
  return shards <= 1 ? 0 : mix32(fnv1a(rolloutId)) % shards
}

/**
 * @example memoryIndexName('default') // 'run:default:memory'
 */
export function memoryIndexName(runId: string): string {
  return `run:${runId}:memory`
}
