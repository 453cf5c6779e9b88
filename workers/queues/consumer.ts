import { pLimit } from '../../src/llm/index.ts'
import { instanceName } from '../../durable-objects/names.ts'
import type { InstanceAddress, RolloutKey } from '../../durable-objects/rubric-instance/index.ts'
import type { Env } from '../env.ts'
import { ANALYSES_IN_FLIGHT, analyzeRollouts, type AnalysisJobResult } from '../pipeline/analyze-rollout.ts'
import { abandonInstanceStep, updateInstanceStep } from '../pipeline/update-step.ts'
import { groupByInstance, rolloutsOf, type AnalysisJob, type SingleAnalysisJob, type StepJob } from './messages.ts'

type QueuedJob = AnalysisJob | SingleAnalysisJob | StepJob

/** Attempts a step job gets before its last one commits "no change" (matches max_retries = 5 in wrangler.toml). */
const STEP_MAX_ATTEMPTS = 6

/**
 * The Worker's queue handler: analysis jobs, step-update jobs, and their dead letters.
 * Every job is idempotent, so at-least-once delivery never double-counts.
 * @example export default { fetch: app.fetch, queue: handleQueueBatch }
 */
export async function handleQueueBatch(batch: MessageBatch<QueuedJob>, env: Env): Promise<void> {
  const deadLetters = batch.queue.endsWith('-dlq')
  const fail = (message: Message<QueuedJob>, error: unknown) => {
    console.error(`[queue ${batch.queue}] ${message.body.type} job failed (attempt ${message.attempts})`, error)
    message.retry({ delaySeconds: Math.min(30, retryBaseSeconds(env) * 2 ** (message.attempts - 1)) })
  }
  const analyses = batch.messages.filter((message): message is Message<AnalysisJob | SingleAnalysisJob> => message.body.type === 'analysis')
  const steps = batch.messages.filter((message): message is Message<StepJob> => message.body.type === 'step')
  const inFlight = pLimit(ANALYSES_IN_FLIGHT)
  await Promise.all([
    ...groupByInstance(analyses, (message) => message.body).map(async (group) => {
      const address = { runId: group[0]!.body.runId, instanceId: group[0]!.body.instanceId }
      const rollouts = group.map((message) => rolloutsOf(message.body))
      const all = rollouts.flat()
      // A rollout's failure retries its message alone (its analysed rollouts are skipped then); a failure of the whole group retries all.
      let results: AnalysisJobResult[]
      try {
        results = await (deadLetters ? markAnalysesFailed(env, address, all) : analyzeRollouts(env, address, all, { inFlight }))
      } catch (error) {
        results = all.map(() => ({ error }))
      }
      let next = 0
      for (const [index, message] of group.entries()) {
        const own = results.slice(next, (next += rollouts[index]!.length))
        const failure = own.find((result): result is { error: unknown } => typeof result === 'object')
        if (failure) fail(message, failure.error)
        else message.ack()
      }
    }),
    ...steps.map((message) => stepJob(env, message, deadLetters).then(() => message.ack(), (error) => fail(message, error))),
  ])
}

async function stepJob(env: Env, message: Message<StepJob>, deadLetters: boolean): Promise<void> {
  const job = message.body
  if (deadLetters) return abandonInstanceStep(env, job, `dead-lettered after ${message.attempts} deliveries`)
  const result = await updateInstanceStep(env, job, { lastAttempt: message.attempts >= STEP_MAX_ATTEMPTS })
  // Waiting for analyses is not a failure: re-send with a delay rather than spend a retry.
  if (result.state === 'waiting') await env.STEP_QUEUE.send(job, { delaySeconds: Math.max(1, Math.ceil(result.retryInMs / 1_000)) })
}

/** `QUEUE_RETRY_BASE_S` (default 2): the first retry's delay; each later one doubles. */
function retryBaseSeconds(env: Env): number {
  const base = Number(env.QUEUE_RETRY_BASE_S ?? 2)
  return Number.isFinite(base) && base >= 0 ? base : 2
}

async function markAnalysesFailed(env: Env, address: InstanceAddress, rollouts: readonly RolloutKey[]): Promise<AnalysisJobResult[]> {
  const instance = env.RUBRIC_INSTANCE.getByName(instanceName(address.runId, address.instanceId))
  await instance.recordAnalyses(rollouts.map((key) => ({ ...key, status: 'failed' })))
  return rollouts.map(() => 'analysed')
}
