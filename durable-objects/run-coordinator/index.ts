/**
 * The run's coordinator: the `RunCoordinator` Durable Object (one per run), the timeline entry its readers get, and
 * its named statements (checked by a query-plan test).
 */
export { RunCoordinator } from './coordinator.ts'

export type { StepTimelineEntry } from './readings.ts'
export { DETAILED_STEPS } from './tables.ts'
