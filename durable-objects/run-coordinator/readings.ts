import type { RunConfig } from '../../src/schemas/run-config.ts'
import type { RubricStatus, StepStatus, StepUpdateOutcome } from '../../src/schemas/status.ts'
import type { ScoreTally } from '../../src/scoring/tally.ts'
import type { IdleGap } from './idle-gap.ts'
import type { StepInstance, StepRows } from './step-rows.ts'
import { COORDINATOR_SQL } from './statements.ts'
import { DETAILED_STEPS, publicStatus, type ShardRow, type StepRow, tallyOf } from './tables.ts'

/** One step as the dashboard's timeline and charts show it. */
export interface StepTimelineEntry {
  step: number
  status: Exclude<StepStatus, 'idle'>
  rollouts: number
  opened_at: string
  closed_at: string | null
  updated_at: string | null
  tally: ScoreTally
  instances: { instance_id: string; rubric_version: number; rollouts: number; update: StepUpdateOutcome | null }[]
}

type InstanceSummary = { instance_id: string; rubric_version: number; rollouts: number }

/**
 * What the coordinator's readers see, and nothing they read writes: `/rubric_status`, the dashboard's timeline, the
 * run's instances and its activity for the runs index.
 * @example readings.status(config, 'grpo-1').step // the step the trainer is told about
 */
export class RunReadings {
  constructor(
    private readonly sql: SqlStorage,
    private readonly rows: StepRows,
    private readonly idle: IdleGap,
  ) {}

  /** Where the run stands (or where `step` stands). */
  status(config: RunConfig, runId: string, step?: number): RubricStatus {
    const reported = step === undefined ? this.rows.reported() : this.rows.step(step)
    const instances = reported ? this.rows.instances(reported) : []
    const rollouts = reported ? this.rows.tally(reported).rollouts : 0
    const status = reported ? publicStatus(reported.status) : 'idle'
    return {
      run_id: runId,
      step: reported?.step ?? this.rows.collecting(),
      status,
      rubric_version: this.rows.maxVersion(),
      instances: instances.map(({ instance_id, rubric_version, rollouts: count, update, progress }) => ({
        instance_id,
        rubric_version,
        rollouts: count,
        ...(update ? { update } : progress ? { progress } : {}),
      })),
      ...summariseUpdates(instances),
      pending: status === 'updating' ? instances.filter((instance) => !instance.update).length : 0,
      rollouts,
      mode: config.mode,
      ...(status === 'collecting' || status === 'idle'
        ? { closes_when: this.closesWhen(config, rollouts, reported) }
        : {}),
      ...(reported?.closed_by ? { closed_by: reported.closed_by } : {}),
      ...(reported?.skipped ? { update_skipped: reported.skipped } : {}),
    }
  }

  /**
   * Every step of the run that has rollouts or has closed, oldest first (at most the newest `limit`), with its score
   * tally and each touched instance's rollouts and update outcome.
   */
  timeline(limit = DETAILED_STEPS): StepTimelineEntry[] {
    const steps = this.sql.exec<StepRow>(COORDINATOR_SQL.latestSteps, limit).toArray().reverse()
    // The step opened by the last close has nothing to show until a shard reports a rollout in it.
    const shown = steps.filter((row) => row.status !== 'collecting' || this.rows.hasShards(row.step))
    return shown.map((row) => {
      const tally = this.rows.tally(row)
      return {
        step: row.step,
        status: publicStatus(row.status),
        rollouts: tally.rollouts,
        opened_at: row.opened_at,
        closed_at: row.closed_at,
        updated_at: row.updated_at,
        tally,
        instances: this.rows.instances(row).map((instance) => ({ ...instance, update: instance.update ?? null })),
      }
    })
  }

  /** Every instance that has taken part in the run, with its newest known rubric version. */
  instances(): InstanceSummary[] {
    const known = new Map(
      this.sql
        .exec<InstanceSummary>(COORDINATOR_SQL.allInstances)
        .toArray()
        .map((row) => [row.instance_id, row]),
    )
    // Steps not yet updated count from their shards' reports.
    for (const row of this.sql.exec<ShardRow>(COORDINATOR_SQL.liveShards)) {
      const tally = tallyOf(row)
      const instance = known.get(row.instance_id) ?? { instance_id: row.instance_id, rubric_version: 1, rollouts: 0 }
      known.set(row.instance_id, {
        ...instance,
        rubric_version: Math.max(instance.rubric_version, tally.max_version ?? 1),
        rollouts: instance.rollouts + tally.rollouts,
      })
    }
    return [...known.values()].sort((a, b) => (a.instance_id < b.instance_id ? -1 : 1))
  }

  /** Rollouts scored (distinct per step) and the last step with any, for the runs index. */
  activity(): { scores: number; last_step: number | null } {
    const live = this.sql
      .exec<StepRow>(COORDINATOR_SQL.liveSteps)
      .toArray()
      .map((row) => ({ step: row.step, rollouts: this.rows.tally(row).rollouts }))
    const scores = this.rows.updatedRollouts() + live.reduce((sum, row) => sum + row.rollouts, 0)
    const lastLive = live.filter((row) => row.rollouts > 0).at(-1)?.step
    const lastUpdated = this.sql.exec<{ step: number | null }>(COORDINATOR_SQL.lastUpdatedStep).one().step
    return { scores, last_step: lastLive ?? lastUpdated ?? null }
  }

  /** What closes the collecting step, said for a person reading `/rubric_status`. */
  private closesWhen(config: RunConfig, rollouts: number, row: StepRow | undefined): string {
    if (config.rollouts_per_step !== null) {
      const missing = Math.max(0, config.rollouts_per_step - rollouts)
      return `after ${missing} more distinct rollouts (rollouts_per_step ${config.rollouts_per_step})`
    }
    const ways = ['on POST /complete']
    if (config.close_on_step_advance) {
      const held = row?.status === 'collecting' ? row.trainer_step : null
      ways.push(
        held === null
          ? "when a rollout's metadata.current_step is past the step's"
          : `when a rollout's metadata.current_step is past ${held}`,
      )
    }
    if (config.close_after_idle_s !== null) {
      const allowance = Math.round(this.idle.allowanceMs() / 1_000)
      const since =
        rollouts > 0
          ? [`the last rollout came ${Math.round((Date.now() - this.idle.lastRolloutTime()) / 1_000)} s ago`]
          : []
      const notes = [...since, ...(allowance > 0 ? [`${allowance} s more for the slowest judgement`] : [])]
      ways.push(
        `after ${config.close_after_idle_s} s without a new rollout${notes.length ? ` (${notes.join('; ')})` : ''}`,
      )
    }
    return ways.length === 1 ? ways[0]! : `${ways.slice(0, -1).join(', ')} or ${ways.at(-1)}`
  }
}

/** The analyses and hacking flags of a step's finished updates, summed over its instances. */
function summariseUpdates(instances: readonly StepInstance[]): Pick<RubricStatus, 'analyses' | 'hacking_flags'> {
  const outcomes = instances.flatMap((instance) => (instance.update ? [instance.update] : []))
  const total = (key: 'analysed' | 'failed' | 'hacking_flags') =>
    outcomes.reduce((sum, outcome) => sum + outcome[key], 0)
  const reasons: RubricStatus['analyses']['reasons'] = {}
  for (const outcome of outcomes)
    for (const [reason, count] of Object.entries(outcome.reasons))
      reasons[reason as keyof typeof reasons] = (reasons[reason as keyof typeof reasons] ?? 0) + count
  return {
    analyses: { analysed: total('analysed'), failed: total('failed'), reasons },
    hacking_flags: total('hacking_flags'),
  }
}
