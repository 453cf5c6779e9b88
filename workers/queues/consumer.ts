import { pLimit } from '../../src/llm/index.ts'
import { instanceName } from '../../durable-objects/names.ts'
import type { Env } from '../env.ts'
import { ANALYSES_IN_FLIGHT, analyzeRollouts, type AnalysisJobResult } from '../pipeline/analyze-rollout.ts'
import { abandonInstanceStep, updateInstanceStep } from '../pipeline/update-step.ts'
import type { AnalysisJob, StepJob } from './messages.ts'

/** Attempts a step job gets before its last one commits "no change" (matches max_retries = 5 in wrangler.toml). */
const STEP_MAX_ATTEMPTS = 6

/**
 * The Worker's queue handler: analysis jobs, step-update jobs, and their dead letters.
 * Every job is idempotent, so at-least-once delivery never double-counts.
 * @example export default { fetch: app.fetch, queue: handleQueueBatch }
 */
export async function handleQueueBatch(batch: MessageBatch<AnalysisJob | StepJob>, env: Env): Promise<void> {
  const deadLetters = batch.queue.endsWith('-dlq')
  const fail = (message: Message<AnalysisJob | StepJob>, error: unknown) => {
    console.error(`[queue ${batch.queue}] ${message.body.type} job failed (attempt ${message.attempts})`, error)
    message.retry({ delaySeconds: Math.min(30, retryBaseSeconds(env) * 2 ** (message.attempts - 1)) })
  }
  const analyses = batch.messages.filter((message): message is Message<AnalysisJob> => message.body.type === 'analysis')
  const steps = batch.messages.filter((message): message is Message<StepJob> => message.body.type === 'step')
  const inFlight = pLimit(ANALYSES_IN_FLIGHT)
  await Promise.all([
    ...groupByInstance(analyses).map(async (group) => {
      const jobs = group.map((message) => message.body)
      // A job's own failure retries that message alone; a failure of the whole group retries every one of them.
      let results: AnalysisJobResult[]
      try {
        results = await (deadLetters ? markAnalysesFailed(env, jobs) : analyzeRollouts(env, jobs, { inFlight }))
      } catch (error) {
        results = jobs.map(() => ({ error }))
      }
      group.forEach((message, i) => {
        const result = results[i]!
        if (typeof result === 'object') fail(message, result.error)
        else message.ack()
      })
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

function groupByInstance(messages: readonly Message<AnalysisJob>[]): Message<AnalysisJob>[][] {
  const groups = new Map<string, Message<AnalysisJob>[]>()
  for (const message of messages) {
    const key = `${message.body.runId}\u0000${message.body.instanceId}`
    groups.set(key, [...(groups.get(key) ?? []), message])
  }
  return [...groups.values()]
}

/** `QUEUE_RETRY_BASE_S` (default 2): the first retry's delay; each later one doubles. */
function retryBaseSeconds(env: Env): number {
  const base = Number(env.QUEUE_RETRY_BASE_S ?? 2)
  return Number.isFinite(base) && base >= 0 ? base : 2
}

async function markAnalysesFailed(env: Env, jobs: readonly AnalysisJob[]): Promise<AnalysisJobResult[]> {
  const { runId, instanceId } = jobs[0]!
  await env.RUBRIC_INSTANCE.getByName(instanceName(runId, instanceId)).recordAnalyses(jobs.map((job) => ({ step: job.step, rollout_id: job.rolloutId, status: 'failed' })))
  return jobs.map(() => 'analysed')
}
