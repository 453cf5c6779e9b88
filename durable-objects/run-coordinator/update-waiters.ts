import { Waiters } from '../waiters.ts'
import type { StepRows } from './step-rows.ts'

/**
 * The trainers waiting in `/rubric_status/wait` for a step's update, by the step they wait for: held open until the
 * step is updated (`release`) or their time runs out.
 * @example const done = await waiters.wait(waiters.target() ?? 0, 30_000)
 */
export class UpdateWaiters {
  private readonly waiters = new Waiters<number, boolean>()

  constructor(private readonly rows: StepRows) {}

  /**
   * The step the trainer waits on: the oldest closed step not yet updated, else the collecting step if any shard has
   * taken rollouts in it; none when nothing is pending.
   */
  target(): number | undefined {
    const updating = this.rows.oldestUnfinished()
    const collecting = this.rows.collecting()
    return updating?.step ?? (this.rows.hasShards(collecting) ? collecting : undefined)
  }

  /** Resolves true once `step` is updated, false when `timeoutMs` passes first. */
  async wait(step: number, timeoutMs: number): Promise<boolean> {
    if (this.rows.step(step)?.status === 'updated') return true
    return this.waiters.wait(step, timeoutMs, false)
  }

  /** `step` is updated: its waiters answer. */
  release(step: number): void {
    this.waiters.release((waited) => waited === step, true)
  }
}
