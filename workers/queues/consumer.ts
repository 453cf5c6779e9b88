import type { Env } from '../env.ts'
import { objects } from '../objects/call.ts'
import { abandonInstanceStep, startProgress, updateInstanceStep } from '../pipeline/update-step.ts'
import type { StepJob } from '../../durable-objects/contracts.ts'
import type { UpdateProgress } from '../../src/schemas/status.ts'

/** Attempts a step job gets before its last one commits "no change" (matches max_retries = 5 in wrangler.toml). */
const STEP_MAX_ATTEMPTS = 6

/**
 * The Worker's queue handler: step-update jobs and their dead letters. Every job is idempotent, so at-least-once
 * delivery never double-counts; a retried job skips the analyses it already made.
 * @example export default { fetch: app.fetch, queue: handleQueueBatch }
 */
export async function handleQueueBatch(batch: MessageBatch<StepJob>, env: Env): Promise<void> {
  const deadLetters = batch.queue.endsWith('-dlq')
  await Promise.all(
    batch.messages.map(async (message) => {
      try {
        if (deadLetters)
          await abandonInstanceStep(env, message.body, `dead-lettered after ${message.attempts} deliveries`)
        else if (mayHaveTwin(message)) {
          const job = message.body
          const claimed = await objects.coordinator(env, job.runId, (run) =>
            run.claimStepJob(job.step, job.instanceId, message.id),
          )
          if (claimed) await runStepJob(env, message)
        } else await runStepJob(env, message)
        message.ack()
      } catch (error) {
        console.error(`[queue ${batch.queue}] step job failed (attempt ${message.attempts})`, error)
        message.retry({ delaySeconds: Math.min(30, retryBaseSeconds(env) * 2 ** (message.attempts - 1)) })
      }
    }),
  )
}

/**
 * A job waiting this long in the queue may have been sent again meanwhile (the coordinator resends one it has not
 * heard from in 180 s): it claims its update before it runs.
 */
const TWIN_RISK_MS = 60_000

/** Whether another run of the message's job may be at work: it was sent again, or it waited long in the queue. */
function mayHaveTwin(message: Message<StepJob>): boolean {
  return (message.body.resends ?? 0) > 0 || Date.now() - message.timestamp.getTime() >= TWIN_RISK_MS
}

function runStepJob(env: Env, message: Message<StepJob>): Promise<unknown> {
  return whileAlive(env, message.body, (progress) =>
    updateInstanceStep(env, message.body, { lastAttempt: message.attempts >= STEP_MAX_ATTEMPTS, progress }),
  )
}

/**
 * Runs a step job's update, telling its coordinator every `STEP_HEARTBEAT_S` (15 unless set) that it is still working
 * and how far it has got (`/rubric_status` shows it), so that an update slower than the coordinator's resend window (a
 * real judge on a CPU) is not sent again and run twice. A note that fails only risks that resend.
 */
async function whileAlive<T>(env: Env, job: StepJob, update: (progress: UpdateProgress) => Promise<T>): Promise<T> {
  const everyS = Number(env.STEP_HEARTBEAT_S ?? 15)
  const progress = startProgress()
  const beat = setInterval(
    () => {
      const now = { ...progress, analyses: { ...progress.analyses }, at: new Date().toISOString() }
      objects
        .coordinator(env, job.runId, (coordinator) => coordinator.stepJobAlive(job.step, job.instanceId, now))
        .catch((error: unknown) => console.warn(`[queue] step ${job.step} heartbeat failed`, error))
    },
    (Number.isFinite(everyS) && everyS > 0 ? everyS : 15) * 1_000,
  )
  try {
    return await update(progress)
  } finally {
    clearInterval(beat)
  }
}

/** `QUEUE_RETRY_BASE_S` (default 2): the first retry's delay; each later one doubles. */
function retryBaseSeconds(env: Env): number {
  const base = Number(env.QUEUE_RETRY_BASE_S ?? 2)
  return Number.isFinite(base) && base >= 0 ? base : 2
}
