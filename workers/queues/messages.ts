/** Analyse one recorded rollout (sent by `/score`, consumed in the background). */
export interface AnalysisJob {
  type: 'analysis'
  runId: string
  instanceId: string
  step: number
  rolloutId: string
}

/** Run one instance's update for a closed step (sent by the RunCoordinator's alarm). */
export interface StepJob {
  type: 'step'
  runId: string
  instanceId: string
  step: number
  /** Epoch ms after which the update stops waiting for pending analyses. */
  deadline: number
}
