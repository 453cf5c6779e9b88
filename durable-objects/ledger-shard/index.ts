export { LedgerShard } from './shard.ts'
