import type { RecordedRollout, StepRollout } from '../../durable-objects/contracts.ts'
import { judgeRollout, type Judgement, type ScorerReasons } from '../../src/agents/scorer/index.ts'
import { groupBy } from '../../src/collections/index.ts'
import type { RunConfig } from '../../src/schemas/run-config.ts'
import type { Rubric } from '../../src/schemas/rubric.ts'
import type { Env } from '../env.ts'
import type { StepJob } from '../../durable-objects/contracts.ts'
import { objects } from '../objects/call.ts'
import { scorerInputOf } from '../scoring/judgement.ts'
import type { RoleModel } from '../scoring/models.ts'

/**
 * Chosen rollouts of a closed step in full (from the ledger shards that hold them, one call per shard) with the rubric
 * versions they were scored on; ids no longer in the ledger are left out.
 * @example const { full, versions } = await recordedRollouts(env, job, ['r1', 'r7'], byId)
 */
export async function recordedRollouts(
  env: Env,
  job: StepJob,
  ids: readonly string[],
  byId: ReadonlyMap<string, StepRollout>,
): Promise<{ full: Map<string, RecordedRollout>; versions: Record<number, Rubric[]> }> {
  const address = { runId: job.runId, instanceId: job.instanceId }
  const byShard = groupBy(ids, (id) => byId.get(id)!.shard)
  const recorded = (
    await Promise.all(
      [...byShard].map(([shard, selected]) =>
        objects.ledger(env, { ...address, shard }, (ledger) => ledger.rollouts(job.step, selected)),
      ),
    )
  ).flat() as RecordedRollout[]
  const versions = await objects.instance(env, address, (instance) =>
    instance.versions([...new Set(recorded.map((rollout) => rollout.entry.rubric_version))]),
  )
  return { full: new Map(recorded.map((rollout) => [rollout.entry.rollout_id, rollout])), versions }
}

/**
 * A recorded rollout judged again on `rubrics` with the run's grading settings (its judging among them), by `judge`'s
 * model (the auditor, or the scorer asked for its reasons).
 * @example const { score } = await judgeRecorded(models.forRole('auditor'), config, recorded, rubrics)
 */
export function judgeRecorded(
  judge: Pick<RoleModel, 'model' | 'settings'>,
  config: RunConfig,
  recorded: RecordedRollout,
  rubrics: Rubric[],
  reasons?: ScorerReasons,
): Promise<Judgement> {
  return judgeRollout(judge.model, scorerInputOf(config, rubrics, recorded, reasons), {
    maxAttempts: judge.settings.max_attempts,
  })
}
