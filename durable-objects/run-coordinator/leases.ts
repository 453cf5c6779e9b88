import type { BudgetRefusal } from '../../src/budgets/index.ts'
import { ledgerShardsOf, type RunConfig } from '../../src/schemas/run-config.ts'
import type { Alarm } from '../alarm.ts'
import type { Announce } from '../contracts.ts'
import type { MetaStore } from '../meta-store.ts'
import { ledgerName } from '../names.ts'
import type { InstanceBudget } from './budgets.ts'
import type { StepLifecycle } from './lifecycle.ts'
import type { StepRows } from './step-rows.ts'

/** Shards one call-back may ask for their free seats: with the close's fan-out this keeps an invocation bounded. */
const RECALLS_PER_CALL_BACK = 128
/**
 * What a lease adds to the seats a shard needs now, as a share of the seats left split over the step's shards: early
 * leases are large (few asks), the last ones small (few seats held idle where no rollout comes, to be called back).
 */
const PREFETCH_SHARE = 1
/** The share of a shard's lease of the step before that its first lease of a step is. */
const HISTORY_SHARE = 0.95
/**
 * How long after the last seat of a step is leased the coordinator calls back the free ones (ms): by then the last
 * rollouts of a trainer that sent the step whole are recorded, and the step closes on them.
 */
const SWEEP_AFTER_MS = 250

/** The answer to a shard's ask for seats: the step and its version, and the seats the shard holds there. */
export interface Lease {
  step: number
  version: number
  leased: number
  refused?: BudgetRefusal
}

/**
 * Counted steps (`rollouts_per_step`), kept off the hot path: each ledger shard leases a block of the collecting
 * step's seats and records into them on its own, asking again only when they run out. The coordinator leases no more
 * than `rollouts_per_step` seats in a step; when they are all leased and a shard needs one, it calls back the free
 * seats of the others (`LedgerShard.yieldSeats`), as it does on its own shortly after the last seat was leased
 * (`sweep`). Once every seat is taken the step closes, holding exactly that many rollouts. Leases are stored on both
 * sides (the coordinator's `step_shards.leased`, the shard's `shard_steps.leased`), so a wake of either loses none;
 * an ask or a call-back sent again answers the lease as it stands. Asks and call-backs run one at a time.
 * @example const lease = await leases.ask(config, announce) // { step: 3, version: 2, leased: 40 }
 */
export class Leases {
  private turn: Promise<unknown> = Promise.resolve()

  constructor(
    private readonly env: Cloudflare.Env,
    private readonly runId: () => string,
    private readonly rows: StepRows,
    private readonly parts: { lifecycle: StepLifecycle; instances: InstanceBudget; meta: MetaStore; wakeUp: Alarm },
  ) {}

  /**
   * Seats for the rollouts of `announce.versions` judged on the collecting step's version: the shard's lease (all
   * taken, or it would not ask) grown by them and a share of what is left; a lease with free seats (one the shard has
   * not heard of, or left unused since a wake) is answered as it is. With no seat left to lease, the others' free
   * ones are called back; a step whose every seat is taken closes, and the shard leases from the next.
   */
  ask(config: RunConfig, announce: Announce): Promise<Lease> {
    return this.inTurn(() => this.lease(config, announce))
  }

  /** A shard's report of the seats of `step` it has taken: the step closes once all are. */
  noteTaken(config: RunConfig, step: number, instanceId: string, shard: number, taken: number): Promise<void> {
    return this.inTurn(async () => {
      if (step !== this.rows.collecting()) return
      this.rows.noteTaken(step, instanceId, shard, taken)
      this.closeIfFull(config, step)
    })
  }

  /**
   * The alarm's part: once every seat of the collecting step has been leased for `SWEEP_AFTER_MS`, the free ones are
   * called back, and the step closes if none was.
   */
  sweep(config: RunConfig): Promise<void> {
    return this.inTurn(async () => {
      const step = this.rows.collecting()
      const due = this.parts.meta.number('lease_sweep_at', 0)
      if (config.rollouts_per_step === null || due === 0 || this.parts.meta.number('lease_sweep_step', -1) !== step)
        return
      if (Date.now() < due) return void (await this.parts.wakeUp.by(due))
      this.parts.meta.delete('lease_sweep_at')
      await this.callBack(step, Infinity)
      this.closeIfFull(config, step)
    })
  }

  private async lease(config: RunConfig, announce: Announce): Promise<Lease> {
    const { instanceId, shard } = announce
    let step = this.rows.openCollecting()
    const held = this.rows.shard(step, instanceId, shard)
    const taken = announce.shardStep === step ? (announce.taken ?? 0) : 0
    let version = this.rows.pinnedVersion(step, instanceId, announce.newestVersion)
    // The shard has free seats (a lease it has not heard of, or one it did not use since a wake): no new ones.
    if (held && held.leased > taken) {
      this.rows.noteTaken(step, instanceId, shard, taken)
      return { step, version, leased: held.leased }
    }
    const needOf = (pinned: number) => (announce.versions ?? []).filter((judged) => judged === pinned).length
    let need = needOf(version)
    let free = this.free(config, step)
    if (need > free) free += await this.callBack(step, need - free, announce)
    if (free === 0) {
      // Every seat of the asker is taken: with the others' taken too, the step is full.
      if (held) this.rows.noteTaken(step, instanceId, shard, taken)
      if (this.closeIfFull(config, step)) {
        step = this.rows.openCollecting()
        version = this.rows.pinnedVersion(step, instanceId, announce.newestVersion)
        need = needOf(version)
        free = this.free(config, step)
      }
    }
    const refused = this.parts.instances.admit(config, step, instanceId)
    if (refused) return { step, version, leased: 0, refused }
    const mine = this.rows.shard(step, instanceId, shard)
    const leased = mine?.leased ?? 0
    const grant = Math.min(free, need + this.prefetch(config, step, free - need, mine ? undefined : announce))
    // One row written an ask: the lease grown with the seats the shard says it took, or its first lease of the step.
    const takenHere = step === announce.shardStep ? Math.min(taken, leased) : 0
    if (!mine) this.rows.registerShard(step, instanceId, shard, version, grant)
    else if (grant > 0) this.rows.setLease(step, instanceId, shard, leased + grant, takenHere)
    else this.rows.noteTaken(step, instanceId, shard, takenHere)
    if (grant > 0 && free === grant) await this.sweepSoon(step)
    return { step, version, leased: leased + grant }
  }

  /** Seats of `step` not leased to any shard. */
  private free(config: RunConfig, step: number): number {
    return config.rollouts_per_step! - this.rows.leasedIn(step)
  }

  /**
   * What a lease adds beyond the seats needed now: a shard's first lease of a step (`first`) is `HISTORY_SHARE` of
   * what it held in the step before (a trainer's load moves little from one step to the next, so most steps cost a
   * shard one ask and a few small ones); otherwise `PREFETCH_SHARE` of the seats left, split over the shards the step
   * is expected to have (those it has, the step before's, and the run's shards per instance, whichever is most).
   */
  private prefetch(config: RunConfig, step: number, left: number, first?: Announce): number {
    const before = first && step > 0 ? (this.rows.shard(step - 1, first.instanceId, first.shard)?.leased ?? 0) : 0
    if (before > 0) return Math.max(0, Math.min(left, Math.floor(before * HISTORY_SHARE)))
    const shards = Math.max(this.rows.shardCount(step), this.rows.shardCount(step - 1), ledgerShardsOf(config))
    return Math.floor((left * PREFETCH_SHARE) / shards)
  }

  /**
   * Calls back the free seats of the step's shards (the asker's aside), one shard at a time, those that may hold most
   * first, until `wanted` are back (or `RECALLS_PER_CALL_BACK` were asked); answers how many came back. A shard that
   * cannot be reached keeps its lease (and the step stays open until it is reached).
   */
  private async callBack(step: number, wanted: number, asker?: Announce): Promise<number> {
    const holders = this.rows
      .untakenShards(step)
      .filter((row) => row.instance_id !== asker?.instanceId || row.shard !== asker?.shard)
      .slice(0, RECALLS_PER_CALL_BACK)
    const runId = this.runId()
    let back = 0
    for (const row of holders) {
      if (back >= wanted) break
      try {
        const ledger = this.env.LEDGER.getByName(ledgerName(runId, row.instance_id, row.shard))
        const { leased } = await ledger.yieldSeats(step)
        back += row.leased - leased
        this.rows.setLease(step, row.instance_id, row.shard, leased, leased)
      } catch (error) {
        console.error(`[${runId}] could not call back the seats of ${row.instance_id}#${row.shard}`, error)
      }
    }
    return back
  }

  /** Every seat of `step` is leased: the free ones are called back shortly, by the alarm (`sweep`). */
  private async sweepSoon(step: number): Promise<void> {
    const at = Date.now() + SWEEP_AFTER_MS
    this.parts.meta.set('lease_sweep_step', step)
    this.parts.meta.set('lease_sweep_at', at)
    await this.parts.wakeUp.by(at)
  }

  /** Closes `step` when all its seats are leased and taken; true when it did. */
  private closeIfFull(config: RunConfig, step: number): boolean {
    if (this.free(config, step) > 0 || this.rows.untakenShards(step).length > 0) return false
    const keeps = this.rows
      .shards(step)
      .map((row) => ({ instanceId: row.instance_id, shard: row.shard, keep: row.leased }))
    this.parts.lifecycle.close(config, step, 'count', keeps)
    return true
  }

  private inTurn<T>(work: () => Promise<T>): Promise<T> {
    const run = this.turn.then(work, work)
    this.turn = run.catch(() => undefined)
    return run
  }
}
