import type { BudgetRefusal } from '../../src/budgets/index.ts'
import type { Announce, CoordinatorReply, Judged, ShardAddress, Submission } from '../contracts.ts'
import type { ShardSteps } from './steps.ts'

/** A submission about to be recorded: new to the shard, with its judgement. */
export type Fresh = Submission & { judged: Judged }

/**
 * The coordinator refused to place the rollouts (a budget of the run: `budgets.instances_per_step`); none is recorded.
 * @example try { await placement.place(fresh) } catch (error) { if (error instanceof PlacementRefused) … }
 */
export class PlacementRefused extends Error {
  constructor(readonly refusal: BudgetRefusal) {
    super(refusal.message)
    this.name = 'PlacementRefused'
  }
}

/**
 * Which step each new rollout of a shard is recorded in. The coordinator decides: once per step for a run whose steps
 * close on `/complete`, a trainer step or an idle gap (the shard then places on its own while it stays announced in
 * its step), and seat by seat when steps close by count. A rollout judged on another version than its step's is
 * placed nowhere (null): its caller judges it again on that step's rubrics.
 * @example const steps = await placement.place(fresh) // Map { submission → 3, other → null }
 */
export class Placement {
  /** The step the coordinator knows this shard in, since this wake (an announce after each wake). */
  private announcedIn: number | undefined
  /** Whether the run closes steps by count, as the coordinator's last answer said (undefined before one). */
  private counted: boolean | undefined
  /** When the coordinator closes the step by idle gap unless rollouts arrive first: past it, a write asks again. */
  private idleDeadline: number | undefined
  /** Requests waiting for the coordinator's seats, asked together once the ask in flight returns. */
  private readonly waiting: {
    versions: number[]
    trainerStep: number
    resolve: (seats: (number | null)[]) => void
    reject: (error: unknown) => void
  }[] = []
  private asking = false

  constructor(
    private readonly steps: ShardSteps,
    private readonly parts: {
      address: () => ShardAddress
      newestVersion: () => Promise<number>
      announce: (announce: Announce) => Promise<CoordinatorReply>
      /** The shard applies the reply's closes and step. */
      applyReply: (reply: CoordinatorReply) => void
    },
  ) {}

  /** Keeps what a coordinator's reply says of the idle gap. */
  heard(reply: CoordinatorReply): void {
    this.idleDeadline = reply.idleDeadline
  }

  /**
   * The step each new rollout is recorded in (null: judge it again on the step's version); `PlacementRefused` when a
   * budget of the run refuses them. Asks the coordinator when
   * the run counts seats, when the shard has not announced itself in its step since this wake, when the rollouts
   * carry a later trainer step, or past the idle deadline (the step may have closed); else the step it announced in.
   */
  async place(fresh: readonly Fresh[]): Promise<Map<Fresh, number | null>> {
    const trainerStep = Math.max(...fresh.map((submission) => submission.metadata.current_step))
    const current = this.steps.current()
    const overdue = this.idleDeadline !== undefined && Date.now() >= this.idleDeadline
    const announced = current !== undefined && this.announcedIn === current && this.counted === false
    if (announced && trainerStep <= this.steps.trainerStep(current) && !overdue) {
      const pinned = this.steps.pinned(current)
      return new Map(
        fresh.map((submission) => [submission, submission.judged.rubricVersion === pinned ? current : null]),
      )
    }
    const seats = await this.ask(
      fresh.map((submission) => submission.judged.rubricVersion),
      trainerStep,
    )
    return new Map(fresh.map((submission, index) => [submission, seats[index] ?? null]))
  }

  /**
   * The coordinator's seats for `versions`. Requests that need it while an ask is in flight go together in the next
   * one: under load a shard makes one call per round trip, not one per request.
   */
  private ask(versions: number[], trainerStep: number): Promise<(number | null)[]> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ versions, trainerStep, resolve, reject })
      if (this.waiting.length === 1 && !this.asking) void this.askWaiting()
    })
  }

  private async askWaiting(): Promise<void> {
    this.asking = true
    while (this.waiting.length > 0) {
      const asks = this.waiting.splice(0)
      try {
        const seats = await this.announce(
          asks.flatMap((one) => one.versions),
          Math.max(...asks.map((one) => one.trainerStep)),
        )
        let next = 0
        for (const one of asks) one.resolve(seats.slice(next, (next += one.versions.length)))
      } catch (error) {
        for (const one of asks) one.reject(error)
      }
    }
    this.asking = false
  }

  private async announce(versions: number[], trainerStep: number): Promise<(number | null)[]> {
    const address = this.parts.address()
    const current = this.steps.current()
    const reply = await this.parts.announce({
      instanceId: address.instanceId,
      shard: address.shard,
      shardStep: current ?? -1,
      trainerStep,
      newestVersion: await this.parts.newestVersion(),
      versions,
    })
    this.parts.applyReply(reply)
    // Not announced: the next rollouts ask again (the step may have closed, leaving room).
    if (reply.refused) throw new PlacementRefused(reply.refused)
    this.counted = reply.counted === true
    this.announcedIn = reply.step
    const seats = reply.seats ?? versions.map(() => null)
    // Kept for lookups after a wake: each step's version, and the highest trainer step announced in it.
    if (reply.version !== undefined) this.steps.pin(reply.step, reply.version, this.counted ? -1 : trainerStep)
    seats.forEach((step, index) => {
      if (step !== null && step !== reply.step) this.steps.pin(step, versions[index]!, -1)
    })
    return seats
  }
}
