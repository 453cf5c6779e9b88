import type { StepUpdateOutcome, UpdateProgress } from '../../src/schemas/status.ts'
import { emptyTally, mergeTallies, type ScoreTally } from '../../src/scoring/tally.ts'
import type { MetaStore } from '../meta-store.ts'
import { COORDINATOR_SQL } from './statements.ts'
import { type ShardRow, type StepRow, tallyOf } from './tables.ts'

/** One instance a step touched, with its update's outcome once it has one (and how far it has got until then). */
export interface StepInstance {
  instance_id: string
  rubric_version: number
  rollouts: number
  update?: StepUpdateOutcome
  progress?: UpdateProgress
}

/**
 * The coordinator's rows of steps and of the shards that took part in them: which step collects, what each shard
 * reported, and the rubric version an instance's rollouts of a step are scored on. Reads and single-row writes; how a
 * step moves from collecting to updated is `StepLifecycle`'s.
 * @example const rows = new StepRows(ctx.storage.sql, meta); const step = rows.openCollecting()
 */
export class StepRows {
  constructor(
    private readonly sql: SqlStorage,
    private readonly meta: MetaStore,
  ) {}

  /** The step the run is collecting. */
  collecting(): number {
    return this.meta.number('collecting_step', 0)
  }

  /** The collecting step, its row written when it has none yet. */
  openCollecting(): number {
    const step = this.collecting()
    this.sql.exec(COORDINATOR_SQL.openStep, step, new Date().toISOString())
    return step
  }

  step(step: number): StepRow | undefined {
    return this.sql.exec<StepRow>(COORDINATOR_SQL.step, step).toArray()[0]
  }

  /** The oldest step that has closed and is not updated yet. */
  oldestUnfinished(): StepRow | undefined {
    return this.sql.exec<StepRow>(COORDINATOR_SQL.oldestUnfinished).toArray()[0]
  }

  /** The steps that stopped taking rollouts and whose shards are being told, oldest first. */
  closing(): number[] {
    return this.sql
      .exec<{ step: number }>(COORDINATOR_SQL.closingSteps)
      .toArray()
      .map((row) => row.step)
  }

  /**
   * The step `/rubric_status` describes: a closed one not yet updated first, then the collecting one once it holds a
   * rollout (as its shards reported or took seats), then the last updated: a step's update, analyses and flags stay in
   * view until the next step has something to show.
   */
  reported(): StepRow | undefined {
    const updating = this.oldestUnfinished()
    if (updating) return updating
    const collecting = this.step(this.collecting())
    const held = collecting
      ? this.shards(collecting.step).some((row) => row.taken > 0 || tallyOf(row).rollouts > 0)
      : false
    if (collecting && held) return collecting
    return this.sql.exec<StepRow>(COORDINATOR_SQL.lastUpdated).toArray()[0] ?? collecting
  }

  shards(step: number): ShardRow[] {
    return this.sql.exec<ShardRow>(COORDINATOR_SQL.stepShards, step).toArray()
  }

  /** Whether any shard has taken part in `step`: one row read, where the steps' hot paths ask it. */
  hasShards(step: number): boolean {
    return this.sql.exec(COORDINATOR_SQL.hasShards, step).toArray().length > 0
  }

  shard(step: number, instanceId: string, shard: number): ShardRow | undefined {
    return this.sql.exec<ShardRow>(COORDINATOR_SQL.shard, step, instanceId, shard).toArray()[0]
  }

  /** A step's scores: its stored sum once updated, else the sum of its shards' reports. */
  tally(row: StepRow): ScoreTally {
    if (row.tally) return JSON.parse(row.tally) as ScoreTally
    return mergeTallies(this.shards(row.step).map(tallyOf))
  }

  /** The instances a step touched: from its shards' reports while it is open or closing, else from its updates. */
  instances(row: StepRow): StepInstance[] {
    if (row.status === 'collecting' || row.status === 'closing') {
      const byInstance = new Map<string, ScoreTally[]>()
      for (const shardRow of this.shards(row.step))
        byInstance.set(shardRow.instance_id, [...(byInstance.get(shardRow.instance_id) ?? []), tallyOf(shardRow)])
      return [...byInstance]
        .map(([instance_id, tallies]) => {
          const tally = mergeTallies(tallies)
          return { instance_id, rubric_version: tally.max_version ?? 1, rollouts: tally.rollouts }
        })
        .sort((a, b) => (a.instance_id < b.instance_id ? -1 : 1))
    }
    return this.sql
      .exec<{
        instance_id: string
        rubric_version: number
        rollouts: number
        outcome: string | null
        progress: string | null
      }>(COORDINATOR_SQL.stepInstances, row.step)
      .toArray()
      .map(({ outcome, progress, ...instance }) => ({
        ...instance,
        ...(outcome
          ? { update: JSON.parse(outcome) as StepUpdateOutcome }
          : progress
            ? { progress: JSON.parse(progress) as UpdateProgress }
            : {}),
      }))
  }

  /**
   * The rubric version every rollout of `step` for the instance is scored on: the one the step's first row for the
   * instance was given, else the newest committed one, as the instance's updates reported it or as the announcing
   * shard has it (`newestVersion`; an update tells the shards before the coordinator). An update that commits while a
   * step collects so takes effect from the instance's next step.
   */
  pinnedVersion(step: number, instanceId: string, newestVersion = 1): number {
    const pinned = this.sql.exec<{ version: number }>(COORDINATOR_SQL.pinnedVersion, step, instanceId).toArray()[0]
    if (pinned) return pinned.version
    const committed = this.sql
      .exec<{ rubric_version: number }>(COORDINATOR_SQL.committedVersion, instanceId)
      .toArray()[0]
    return Math.max(committed?.rubric_version ?? 1, newestVersion)
  }

  /** A shard's tally of `step` (absolute), registering the shard there; a confirmed close's row stays as confirmed. */
  upsertShard(step: number, instanceId: string, shard: number, tally: ScoreTally, arrivedAt: number): void {
    this.sql.exec(
      COORDINATOR_SQL.upsertShard,
      step,
      instanceId,
      shard,
      JSON.stringify(tally),
      this.pinnedVersion(step, instanceId),
      arrivedAt,
    )
  }

  /**
   * A shard leasing seats in a counted `step`: registered once, with the step's version for its instance and its
   * first lease.
   */
  registerShard(step: number, instanceId: string, shard: number, version: number, leased: number): void {
    this.sql.exec(COORDINATOR_SQL.registerShard, step, instanceId, shard, JSON.stringify(emptyTally()), version, leased)
  }

  /** The seats of counted `step` leased to its shards. */
  leasedIn(step: number): number {
    return this.sql.exec<{ n: number }>(COORDINATOR_SQL.leasedInStep, step).one().n
  }

  /** How many shards take part in `step` (none for a step no longer kept). */
  shardCount(step: number): number {
    return step < 0 ? 0 : this.sql.exec<{ n: number }>(COORDINATOR_SQL.shardCount, step).one().n
  }

  /** The shards of counted `step` that may hold free seats, those that may hold most first. */
  untakenShards(step: number): ShardRow[] {
    return this.sql
      .exec<ShardRow>(COORDINATOR_SQL.untakenShards, step)
      .toArray()
      .sort((a, b) => b.leased - b.taken - (a.leased - a.taken))
  }

  /** A shard's lease of counted `step` (absolute) and the seats of it taken. */
  setLease(step: number, instanceId: string, shard: number, leased: number, taken: number): void {
    this.sql.exec(COORDINATOR_SQL.setLease, leased, taken, step, instanceId, shard)
  }

  /** The seats of counted `step` a shard has taken (its rows), as it says: never more than its lease. */
  noteTaken(step: number, instanceId: string, shard: number, taken: number): void {
    this.sql.exec(COORDINATOR_SQL.noteTaken, taken, step, instanceId, shard, taken)
  }

  /** A shard about to take rollouts in `step`: registered with an empty tally, or its arrival time moved on. */
  announceShard(step: number, instanceId: string, shard: number, version: number, at: number): void {
    this.sql.exec(COORDINATOR_SQL.announceShard, step, instanceId, shard, JSON.stringify(emptyTally()), version, at)
  }

  /** The shard confirmed the close of `step`: what it keeps of it (`closed`) is final. */
  confirmClose(step: number, instanceId: string, shard: number, closed: ScoreTally): void {
    this.sql.exec(COORDINATOR_SQL.confirmClose, closed.rollouts, JSON.stringify(closed), step, instanceId, shard)
  }

  /** The highest `metadata.current_step` a rollout of `step` carried. */
  noteTrainerStep(step: number, trainerStep: number): void {
    this.sql.exec(COORDINATOR_SQL.noteTrainerStep, trainerStep, trainerStep, step)
  }

  /** The newest rubric version any instance of the run has. */
  maxVersion(): number {
    return this.meta.number('max_version', 1)
  }

  /** Rollouts of the steps already updated, summed as each finished. */
  updatedRollouts(): number {
    return this.meta.number('updated_rollouts', 0)
  }

  noteVersion(version: number): void {
    if (version > this.maxVersion()) this.meta.set('max_version', version)
  }
}
