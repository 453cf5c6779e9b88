import { fnv1a, mix32 } from '../src/hash/index.ts'
import type { InstanceAddress, ShardAddress } from './contracts.ts'

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

/**
 * Where a shard's rollouts of one step are archived in R2.
 * @example archiveKey({ runId: 'r1', instanceId: 'global', shard: 3 }, 12) // 'runs/r1/steps/000012/global.3.ndjson'
 */
export function archiveKey(address: ShardAddress, step: number): string {
  return `${archivePrefix(address.runId)}${String(step).padStart(6, '0')}/${address.instanceId}.${address.shard}.ndjson`
}

/**
 * Where a run's archive lies in R2: every key of the run starts with it, in step order.
 * @example archivePrefix('grpo-1') // 'runs/grpo-1/steps/'
 */
export function archivePrefix(runId: string): string {
  return `runs/${runId}/steps/`
}

/**
 * The step and instance an archive key names (undefined for a key that is not one).
 * @example archiveKeyParts('runs/grpo-1/steps/000012/q.7.0.ndjson') // { step: 12, instanceId: 'q.7', shard: 0 }
 */
export function archiveKeyParts(key: string): { step: number; instanceId: string; shard: number } | undefined {
  const match = /\/steps\/(\d{6,})\/(.+)\.(\d+)\.ndjson$/.exec(key)
  return match ? { step: Number(match[1]), instanceId: match[2]!, shard: Number(match[3]) } : undefined
}

/**
 * The run an object's name belongs to (`ctx.id.name` inside the object): the inverse of the name builders above. Run
 * ids hold no `:`, so the run is the name's second part whatever follows it.
 * @example runIdOf('run:grpo-1:inst:global:ledger:3') // 'grpo-1'
 */
export function runIdOf(name: string | undefined): string {
  const match = /^run:([^:]+)/.exec(name ?? '')
  if (!match) throw new Error(`"${name}" is not a run's object name`)
  return match[1]!
}

/**
 * The run and instance a RubricInstance's name says.
 * @example instanceAddressOf('run:grpo-1:inst:q.7') // { runId: 'grpo-1', instanceId: 'q.7' }
 */
export function instanceAddressOf(name: string | undefined): InstanceAddress {
  const match = /^run:([^:]+):inst:(.+)$/.exec(name ?? '')
  if (!match) throw new Error(`"${name}" is not a rubric instance's name`)
  return { runId: match[1]!, instanceId: match[2]! }
}

/**
 * The run, instance and shard a LedgerShard's name says (an instance id may hold `:`; the shard ends the name).
 * @example ledgerAddressOf('run:grpo-1:inst:global:ledger:3') // { runId: 'grpo-1', instanceId: 'global', shard: 3 }
 */
export function ledgerAddressOf(name: string | undefined): ShardAddress {
  const match = /^run:([^:]+):inst:(.+):ledger:(\d+)$/.exec(name ?? '')
  if (!match) throw new Error(`"${name}" is not a ledger shard's name`)
  return { runId: match[1]!, instanceId: match[2]!, shard: Number(match[3]) }
}
