export { LedgerShard } from './shard.ts'
export { LATE_RETRY_STEPS } from './rows.ts'
export { LEDGER_SQL, type StepRolloutRow } from './tables.ts'
