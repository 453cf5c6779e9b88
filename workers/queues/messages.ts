import type { RolloutKey } from '../../durable-objects/rubric-instance/index.ts'

/** Analyse recorded rollouts of one run × instance (sent by `/score` in bundles, consumed in the background). */
export interface AnalysisJob {
  type: 'analysis'
  runId: string
  instanceId: string
  rollouts: RolloutKey[]
}

/** An earlier release's analysis job, one rollout each: still in the queue when a deploy lands, so still read. */
export interface SingleAnalysisJob {
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

/** Rollouts per analysis message: one consumer invocation's connections (6), and a sixth of the queue operations. */
export const ROLLOUTS_PER_ANALYSIS_JOB = 6

/**
 * The analysis jobs for rollouts of one run × instance, at most ROLLOUTS_PER_ANALYSIS_JOB rollouts each.
 * @example analysisJobs('default', 'global', [{ step: 0, rollout_id: 'r1' }]) // [{ type: 'analysis', …, rollouts: [{ step: 0, rollout_id: 'r1' }] }]
 */
function analysisJobs(runId: string, instanceId: string, rollouts: readonly RolloutKey[]): AnalysisJob[] {
  const jobs: AnalysisJob[] = []
  for (let start = 0; start < rollouts.length; start += ROLLOUTS_PER_ANALYSIS_JOB) {
    jobs.push({ type: 'analysis', runId, instanceId, rollouts: rollouts.slice(start, start + ROLLOUTS_PER_ANALYSIS_JOB) })
  }
  return jobs
}

/**
 * The rollouts a queued analysis job names, whichever release sent it.
 * @example rolloutsOf({ type: 'analysis', runId: 'default', instanceId: 'global', step: 0, rolloutId: 'r1' }) // [{ step: 0, rollout_id: 'r1' }]
 */
export function rolloutsOf(job: AnalysisJob | SingleAnalysisJob): RolloutKey[] {
  return 'rollouts' in job ? job.rollouts : [{ step: job.step, rollout_id: job.rolloutId }]
}

/**
 * Items grouped by the run × instance `jobOf` names, in first-seen order.
 * @example groupByInstance(messages, (message) => message.body) // [[m1, m3], [m2]]
 */
export function groupByInstance<Item>(items: readonly Item[], jobOf: (item: Item) => { runId: string; instanceId: string }): Item[][] {
  const groups = new Map<string, Item[]>()
  for (const item of items) {
    const { runId, instanceId } = jobOf(item)
    const key = `${runId}\u0000${instanceId}`
    const group = groups.get(key)
    if (group) group.push(item)
    else groups.set(key, [item])
  }
  return [...groups.values()]
}

/**
 * Sends the rollouts of any jobs as jobs of one instance each, up to ROLLOUTS_PER_ANALYSIS_JOB rollouts per job, in
 * `sendBatch` calls of at most 100 messages (the Queues limit).
 * @example await sendAnalysisJobs(env.ANALYSIS_QUEUE, [{ type: 'analysis', runId, instanceId, rollouts: stillPending }])
 */
export async function sendAnalysisJobs(queue: Queue<AnalysisJob>, jobs: readonly AnalysisJob[]): Promise<void> {
  const messages = groupByInstance(jobs, (job) => job).flatMap((group) => analysisJobs(group[0]!.runId, group[0]!.instanceId, group.flatMap((job) => job.rollouts)))
  for (let start = 0; start < messages.length; start += 100) await queue.sendBatch(messages.slice(start, start + 100).map((body) => ({ body })))
}
