import { createApp } from './app.ts'
import type { Env } from './env.ts'
import { handleQueueBatch } from './queues/consumer.ts'

export { MemoryIndex } from '../durable-objects/memory-index/index.ts'
export { RubricInstance } from '../durable-objects/rubric-instance/index.ts'
export { RunCoordinator } from '../durable-objects/run-coordinator/index.ts'

const app = createApp()

export default { fetch: app.fetch, queue: handleQueueBatch } satisfies ExportedHandler<Env, import('./queues/messages.ts').AnalysisJob | import('./queues/messages.ts').SingleAnalysisJob | import('./queues/messages.ts').StepJob>
