import type { BudgetRefusal } from '../../src/budgets/index.ts'
import { pLimit } from '../../src/llm/index.ts'
import { ledgerShardsOf, type RunConfig } from '../../src/schemas/run-config.ts'
import type { Announce } from '../contracts.ts'
import { ledgerName } from '../names.ts'
import type { InstanceBudget } from './budgets.ts'
import type { StepLifecycle } from './lifecycle.ts'
import type { StepRows } from './step-rows.ts'

/** Shards asked at once to give back their free seats. */
const RECALL_FAN_OUT = 32
/** Shards one ask may call back seats from: with the close's fan-out this keeps an invocation under its subrequests. */
const RECALLS_PER_ASK = 128
/**
 * The share of what is left of a step's seats, split over its shards, that a lease adds to what the shard needs now:
 * early leases are large (few asks), the last ones small (few seats held idle where no rollout comes).
 */
const PREFETCH_SHARE = 0.5

/** The answer to a shard's ask for seats: the step and its version, the seats the shard holds there, and more. */
export interface Lease {
  step: number
  version: number
  leased: number
  /** No seat of `step` is left to lease. */
  last: boolean
  refused?: BudgetRefusal
}

/**
 * Counted steps (`rollouts_per_step`), kept off the hot path: each ledger shard leases a block of the collecting
 * step's seats and records into them on its own, asking again only when they run out. The coordinator leases no more
 * than `rollouts_per_step` seats in a step; when they are all leased and a shard needs one, it calls back the free
 * seats of the others (`LedgerShard.yieldSeats`); once every seat is taken the step closes, holding exactly that many
 * rollouts, and the asking shard leases from the next. Leases are stored on both sides (the coordinator's
 * `step_shards.leased`, the shard's `shard_steps.leased`), so a wake of either loses none; an ask or a call-back sent
 * again answers the lease as it stands. Asks and call-backs run one at a time.
 * @example const lease = await leases.ask(config, announce) // { step: 3, version: 2, leased: 40, last: false }
 */
export class Leases {
  private turn: Promise<unknown> = Promise.resolve()

  constructor(
    private readonly env: Cloudflare.Env,
    private readonly runId: () => string,
    private readonly rows: StepRows,
    private readonly parts: { lifecycle: StepLifecycle; instances: InstanceBudget },
  ) {}

  /**
   * Seats for the rollouts of `announce.versions` judged on the collecting step's version, the shard's lease (which
   * it says is all taken) grown by them and a share of what is left; a lease the shard has not heard of is answered
   * as it is. Closes the step when every seat is taken, then leases from the next.
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

  private async lease(config: RunConfig, announce: Announce): Promise<Lease> {
    const { instanceId, shard } = announce
    let step = this.rows.openCollecting()
    const held = this.rows.shard(step, instanceId, shard)
    const taken = announce.shardStep === step ? (announce.taken ?? 0) : 0
    let version = this.rows.pinnedVersion(step, instanceId, announce.newestVersion)
    if (held) this.rows.noteTaken(step, instanceId, shard, taken)
    // The shard has free seats (a lease it has not heard of, or one it did not use since a wake): no new ones.
    if (held && held.leased > taken) return { step, version, leased: held.leased, last: this.free(config, step) === 0 }
    let need = (announce.versions ?? []).filter((judged) => judged === version).length
    let free = this.free(config, step)
    if (need > free) free += await this.recall(step, need - free, announce)
    if (need > 0 && free === 0 && this.closeIfFull(config, step)) {
      step = this.rows.openCollecting()
      version = this.rows.pinnedVersion(step, instanceId, announce.newestVersion)
      need = (announce.versions ?? []).filter((judged) => judged === version).length
      free = this.free(config, step)
    }
    const refused = this.parts.instances.admit(config, step, instanceId)
    if (refused) return { step, version, leased: 0, last: false, refused }
    const mine = this.rows.shard(step, instanceId, shard)?.leased ?? 0
    const grant = need === 0 ? 0 : Math.min(free, need + this.prefetch(config, step, free - need))
    this.rows.registerShard(step, instanceId, shard, version)
    if (grant > 0) this.rows.setLease(step, instanceId, shard, mine + grant, mine)
    return { step, version, leased: mine + grant, last: free - grant === 0 }
  }

  /** Seats of `step` not leased to any shard. */
  private free(config: RunConfig, step: number): number {
    return config.rollouts_per_step! - this.rows.leasedIn(step)
  }

  /**
   * What a lease adds beyond the seats needed now: `PREFETCH_SHARE` of the seats left, split over the shards the step
   * is expected to have (those it has, the step before's, and the run's shards per instance, whichever is most).
   */
  private prefetch(config: RunConfig, step: number, left: number): number {
    const shards = Math.max(this.rows.shardCount(step), this.rows.shardCount(step - 1), ledgerShardsOf(config))
    return Math.floor((left * PREFETCH_SHARE) / shards)
  }

  /**
   * Calls back the free seats of the step's other shards, those that may hold most first, until `wanted` are back
   * (or `RECALLS_PER_ASK` were asked); answers how many came back. A shard that cannot be reached keeps its lease.
   */
  private async recall(step: number, wanted: number, asker: Announce): Promise<number> {
    const holders = this.rows
      .untakenShards(step)
      .filter((row) => row.instance_id !== asker.instanceId || row.shard !== asker.shard)
      .slice(0, RECALLS_PER_ASK)
    const limit = pLimit(RECALL_FAN_OUT)
    let back = 0
    const runId = this.runId()
    await Promise.all(
      holders.map((row) =>
        limit(async () => {
          if (back >= wanted) return
          try {
            const ledger = this.env.LEDGER.getByName(ledgerName(runId, row.instance_id, row.shard))
            const { leased } = await ledger.yieldSeats(step)
            back += row.leased - leased
            this.rows.setLease(step, row.instance_id, row.shard, leased, leased)
          } catch (error) {
            console.error(`[${runId}] could not call back the seats of ${row.instance_id}#${row.shard}`, error)
          }
        }),
      ),
    )
    return back
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
