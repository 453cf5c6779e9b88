import { createApp } from './app.ts'

export { RubricInstance } from '../durable-objects/rubric-instance/index.ts'
export { RunCoordinator } from '../durable-objects/run-coordinator/index.ts'

const app = createApp()

export default { fetch: app.fetch } satisfies ExportedHandler<import('./env.ts').Env>
