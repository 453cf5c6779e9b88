import type { LedgerRows } from './rows.ts'
import type { ShardSteps } from './steps.ts'

/**
 * The seats of counted steps this shard leased from the coordinator, so that most records need no call to it: a step
 * holds exactly `rollouts_per_step` rows because the coordinator leases no more seats than that and closes the step
 * only once every lease is taken. A seat is free, reserved by a record in flight (`reserve`), or used by a row
 * (`use`); a record that wrote no row gives its seat back (`giveBack`). The lease is stored (`shard_steps.leased`) and
 * used seats are the step's rows, so a wake loses nothing but the reservations of records that died with it.
 * @example if (lease.reserve(step)) { try { insert(); lease.use(step) } catch { lease.giveBack(step) } }
 */
export class SeatLease {
  private readonly reserved = new Map<number, number>()
  /** Rows of each step, counted once per wake and then kept as rows are written. */
  private readonly usedCount = new Map<number, number>()

  constructor(
    private readonly steps: ShardSteps,
    private readonly rows: LedgerRows,
  ) {}

  /** The seats of `step` this shard holds. */
  leased(step: number): number {
    return this.steps.leased(step)
  }

  /** The coordinator's answer: this shard holds `seats` of `step`. */
  heard(step: number, seats: number): void {
    this.steps.setLeased(step, seats)
  }

  /** Takes a free seat of `step` for a record in flight; false when none is free. */
  reserve(step: number): boolean {
    if (this.free(step) <= 0) return false
    this.reserved.set(step, (this.reserved.get(step) ?? 0) + 1)
    return true
  }

  /** A reserved seat became a row. */
  use(step: number): void {
    this.release(step)
    this.usedCount.set(step, this.used(step) + 1)
  }

  /** A reserved seat produced no row: it is free again. */
  giveBack(step: number): void {
    this.release(step)
  }

  /** The seats of `step` taken: rows, and the seats of records in flight. */
  taken(step: number): number {
    return this.used(step) + (this.reserved.get(step) ?? 0)
  }

  /**
   * The coordinator calls back the free seats of `step` (another shard needs them): the lease shrinks to the seats
   * taken, which it answers. A call sent again answers the same.
   */
  yieldFree(step: number): number {
    const taken = this.taken(step)
    if (this.leased(step) > taken) this.steps.setLeased(step, taken)
    return this.leased(step)
  }

  private free(step: number): number {
    return this.leased(step) - this.taken(step)
  }

  private used(step: number): number {
    let used = this.usedCount.get(step)
    if (used === undefined) this.usedCount.set(step, (used = this.rows.count(step)))
    return used
  }

  private release(step: number): void {
    this.reserved.set(step, Math.max(0, (this.reserved.get(step) ?? 0) - 1))
  }
}
