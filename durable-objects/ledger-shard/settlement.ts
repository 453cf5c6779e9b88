import type { RubricSnapshot } from '../../src/schemas/rubric.ts'
import type { Judged, LedgerEntry } from '../contracts.ts'
import { Waiters } from '../waiters.ts'
import type { LedgerRows } from './rows.ts'
import type { ShardSnapshots } from './snapshots.ts'
import type { ShardSteps } from './steps.ts'

/**
 * Sync mode's final scores: a rollout's answer waits for its step's update (`awaitUpdate`), its first request re-judges
 * it on the rubrics that update left and settles its row once (`settle`), or keeps its first score when the wait ran
 * out (`finalize`). Either makes the row final, and a retry of the rollout is never judged again: it waits for the
 * row to be final (`awaitFinal`) and answers it, so every answer, the tallies and the archive agree.
 * @example const entry = await settlement.awaitFinal(3, 'r-1', 30_000)
 */
export class Settlement {
  /** Requests waiting for a step's update, released with the rubrics it left. */
  private readonly updates = new Waiters<number, RubricSnapshot | undefined>()
  /** Retries waiting for a rollout's row to be final, by `step\0rollout id`. */
  private readonly finals = new Waiters<string, true>()

  constructor(
    private readonly rows: LedgerRows,
    private readonly steps: ShardSteps,
    private readonly snapshots: ShardSnapshots,
    /** The step is archived: its rows are final as they stand. */
    private readonly isArchived: (step: number) => boolean,
    /** A row of the current step changed: its tally is counted again. */
    private readonly changed: (step: number) => void,
  ) {}

  /** The rubrics of `step`'s update once it has committed, or undefined after `timeoutMs`. */
  async awaitUpdate(step: number, timeoutMs: number): Promise<RubricSnapshot | undefined> {
    if (this.steps.updatedThrough() >= step) return this.updatedSnapshot(step)
    return this.updates.wait(step, timeoutMs, undefined)
  }

  /** The update of `step` committed: its waiters, and those of the steps before it, answer. */
  async stepUpdated(step: number): Promise<void> {
    for (const waited of this.updates.keys())
      if (waited <= step) this.updates.release((key) => key === waited, await this.updatedSnapshot(waited))
  }

  /**
   * The rollout's score on the rubrics its step's update left, for good; a row already final (or archived, or
   * judged on another version than that update's) stays as it is. Undefined when the row is gone.
   */
  settle(step: number, rolloutId: string, judged: Judged): LedgerEntry | undefined {
    const row = this.rows.entry(step, rolloutId)
    const settleable =
      row &&
      row.rubric_version !== judged.rubricVersion &&
      !this.isArchived(step) &&
      judged.rubricVersion === this.steps.update(step)?.version
    if (settleable) {
      this.rows.settle(step, rolloutId, judged)
      this.changed(step)
    } else if (row) this.rows.finalize(step, rolloutId)
    this.finals.release((key) => key === finalKey(step, rolloutId), true)
    return this.rows.entry(step, rolloutId)
  }

  /** The rollout keeps the score it was first answered with (its wait ran out): the row is final as it stands. */
  finalize(step: number, rolloutId: string): LedgerEntry | undefined {
    this.rows.finalize(step, rolloutId)
    this.finals.release((key) => key === finalKey(step, rolloutId), true)
    return this.rows.entry(step, rolloutId)
  }

  /**
   * A retry's answer: the rollout's row once it is final, or on the version its step's update left; after
   * `timeoutMs` the row is made final as it stands. Undefined when the row is gone.
   */
  async awaitFinal(step: number, rolloutId: string, timeoutMs: number): Promise<LedgerEntry | undefined> {
    if (!this.settled(step, rolloutId)) await this.finals.wait(finalKey(step, rolloutId), timeoutMs, true)
    if (!this.settled(step, rolloutId)) return this.finalize(step, rolloutId)
    return this.rows.entry(step, rolloutId)
  }

  private settled(step: number, rolloutId: string): boolean {
    const row = this.rows.entry(step, rolloutId)
    if (!row || this.isArchived(step) || this.rows.isFinal(step, rolloutId)) return true
    return row.rubric_version === this.steps.update(step)?.version
  }

  /** The rubrics sync-mode rollouts of an updated step are settled on. */
  private async updatedSnapshot(step: number): Promise<RubricSnapshot> {
    const version = this.steps.update(step)?.version
    return version ? this.snapshots.of(version) : this.snapshots.current()
  }
}

function finalKey(step: number, rolloutId: string): string {
  return `${step}\u0000${rolloutId}`
}
