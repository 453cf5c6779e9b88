import { pLimit } from '../../src/llm/index.ts'
import { instanceName } from '../../durable-objects/names.ts'
import type { Env } from '../env.ts'
import { analyzeRollout } from '../pipeline/analyze-rollout.ts'
import { abandonInstanceStep, updateInstanceStep } from '../pipeline/update-step.ts'
import type { AnalysisJob, StepJob } from './messages.ts'

/** Attempts a step job gets before its last one commits "no change" (matches max_retries = 5 in wrangler.toml). */
const STEP_MAX_ATTEMPTS = 6
/** Workers allow 6 open connections per invocation; analyses of a batch share them. */
const ANALYSES_IN_FLIGHT = 6

/**
 * The Worker's queue handler: analysis jobs, step-update jobs, and their dead letters.
 * Every job is idempotent, so at-least-once delivery never double-counts.
 * @example export default { fetch: app.fetch, queue: handleQueueBatch }
 */
export async function handleQueueBatch(batch: MessageBatch<AnalysisJob | StepJob>, env: Env): Promise<void> {
  const deadLetters = batch.queue.endsWith('-dlq')
  const limit = pLimit(ANALYSES_IN_FLIGHT)
  await Promise.all(
    batch.messages.map((message) =>
      limit(async () => {
        const job = message.body
        try {
          if (job.type === 'analysis') {
            if (deadLetters) await markAnalysisFailed(env, job)
            else await analyzeRollout(env, job)
          } else if (deadLetters) {
            await abandonInstanceStep(env, job, `dead-lettered after ${message.attempts} deliveries`)
          } else {
            const result = await updateInstanceStep(env, job, { lastAttempt: message.attempts >= STEP_MAX_ATTEMPTS })
            // Waiting for analyses is not a failure: re-send with a delay rather than spend a retry.
            if (result.state === 'waiting') await env.STEP_QUEUE.send(job, { delaySeconds: Math.max(1, Math.ceil(result.retryInMs / 1_000)) })
          }
          message.ack()
        } catch (error) {
          console.error(`[queue ${batch.queue}] ${job.type} job failed (attempt ${message.attempts})`, error)
          message.retry({ delaySeconds: Math.min(30, retryBaseSeconds(env) * 2 ** (message.attempts - 1)) })
        }
      }),
    ),
  )
}

/** `QUEUE_RETRY_BASE_S` (default 2): the first retry's delay; each later one doubles. */
function retryBaseSeconds(env: Env): number {
  const base = Number(env.QUEUE_RETRY_BASE_S ?? 2)
  return Number.isFinite(base) && base >= 0 ? base : 2
}

async function markAnalysisFailed(env: Env, job: AnalysisJob): Promise<void> {
  await env.RUBRIC_INSTANCE.getByName(instanceName(job.runId, job.instanceId)).recordAnalysis(job.step, job.rolloutId, { status: 'failed' })
}
