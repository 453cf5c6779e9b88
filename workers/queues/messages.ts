/** Run one instance's update for a closed step (sent by the RunCoordinator's alarm). */
export interface StepJob {
  type: 'step'
  runId: string
  instanceId: string
  step: number
  /**
   * The instance's ledger shards that took part in the step, each with how many of its rollouts the step keeps (null:
   * all).
   */
  shards: { shard: number; keep: number | null }[]
}
