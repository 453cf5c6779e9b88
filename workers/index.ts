import { createApp } from './app.ts'
import type { Env } from './env.ts'
import { handleQueueBatch } from './queues/consumer.ts'
import type { StepJob } from '../durable-objects/contracts.ts'

export { LedgerShard } from '../durable-objects/ledger-shard/index.ts'
export { MemoryIndex } from '../durable-objects/memory-index/index.ts'
export { RubricInstance } from '../durable-objects/rubric-instance/index.ts'
export { RunCoordinator } from '../durable-objects/run-coordinator/index.ts'
export { JudgeEntrypoint } from './scoring/judge-entrypoint.ts'

const app = createApp()

export default { fetch: app.fetch, queue: handleQueueBatch } satisfies ExportedHandler<Env, StepJob>
