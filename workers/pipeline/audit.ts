import type { StepRollout } from '../../durable-objects/contracts.ts'
import { hash32 } from '../../src/hash/index.ts'
import type { RunConfig } from '../../src/schemas/run-config.ts'
import type { StepUpdateOutcome } from '../../src/schemas/status.ts'
import { mean, rankCorrelation } from '../../src/stats/index.ts'
import type { Env } from '../env.ts'
import type { StepJob } from '../../durable-objects/contracts.ts'
import type { requestModels } from '../scoring/models.ts'
import { judgeRecorded, recordedRollouts } from './recorded.ts'

type Audit = NonNullable<StepUpdateOutcome['audit']>

/**
 * Whether a rollout is in the audited sample: a hash of its id and step under the share, so a redelivered job audits
 * the same rollouts and the sample spreads evenly over shards and groups.
 */
function inAuditSample(rolloutId: string, step: number, share: number): boolean {
  return hash32(`audit:${step}:${rolloutId}`) / 2 ** 32 < share
}

/**
 * Re-judges the step's sampled scores with the run's auditor (the scorer's prompt, on the rubric version each score
 * used) and compares: the mean absolute difference and the rank correlation. A failed re-judgement is counted, never
 * taken as a difference. Undefined when the run asks for no audit or samples nothing.
 * @example const audit = await auditStep(env, config, job, rollouts, models)
 */
export async function auditStep(
  env: Env,
  config: RunConfig,
  job: StepJob,
  rollouts: readonly StepRollout[],
  models: ReturnType<typeof requestModels>,
): Promise<Audit | undefined> {
  const share = config.audit.sample
  if (share <= 0) return undefined
  const sampled = rollouts.filter((rollout) => inAuditSample(rollout.rollout_id, job.step, share))
  if (sampled.length === 0) return undefined
  const byId = new Map(rollouts.map((rollout) => [rollout.rollout_id, rollout]))
  const { full, versions } = await recordedRollouts(
    env,
    job,
    sampled.map((rollout) => rollout.rollout_id),
    byId,
  )
  const auditor = models.forRole('auditor')
  const pairs = await Promise.all(
    sampled.map(async ({ rollout_id, score }) => {
      const recorded = full.get(rollout_id)
      const rubrics = recorded ? versions[recorded.entry.rubric_version] : undefined
      if (!recorded || !rubrics) return undefined
      try {
        const judged = await judgeRecorded(auditor, config, recorded, rubrics)
        return { judge: score, auditor: judged.score }
      } catch (error) {
        console.warn(`[${job.runId}/${job.instanceId} step ${job.step}] audit of ${rollout_id} failed:`, error)
        return undefined
      }
    }),
  )
  const judged = pairs.filter((pair) => pair !== undefined)
  return {
    auditor: auditor.label,
    sampled: sampled.length,
    judged: judged.length,
    mean_abs_diff: mean(judged.map((pair) => Math.abs(pair.judge - pair.auditor))),
    rank_corr: rankCorrelation(
      judged.map((pair) => pair.judge),
      judged.map((pair) => pair.auditor),
    ),
  }
}
