import type { BudgetRefusal } from '../../src/budgets/index.ts'
import type { Announce, CoordinatorReply, Judged, ShardAddress, Submission } from '../contracts.ts'
import type { SeatLease } from './seat-lease.ts'
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

/** Times one ask is sent when it fails (the coordinator reset under it): an ask sent again is harmless. */
const ASK_ATTEMPTS = 3

/**
 * Which step each new rollout of a shard is recorded in. The shard announces itself to the coordinator once per step
 * (and again on a later trainer step, or past the idle deadline) and places the rest on its own; when steps close by
 * count, each new rollout takes one of the seats the shard leased (`SeatLease`), and the coordinator is asked only
 * when they run out. A rollout judged on another version than its step's is placed nowhere (null).
 * @example const steps = await placement.place(fresh) // Map { submission → 3, other → null }
 */
export class Placement {
  /** The step the coordinator knows this shard in, since this wake (an announce after each wake). */
  private announcedIn: number | undefined
  /** Whether the run closes steps by count, as the coordinator's last answer said (undefined before one). */
  private counted: boolean | undefined
  /** When the coordinator closes the step by idle gap unless rollouts arrive first: past it, a write asks again. */
  private idleDeadline: number | undefined
  /** Requests waiting to ask the coordinator, asked together once the ask in flight returns. */
  private readonly waiting: { versions: number[]; trainerStep: number; done: (error?: unknown) => void }[] = []
  private asking = false

  constructor(
    private readonly steps: ShardSteps,
    private readonly lease: SeatLease,
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

  /** Whether the run closes steps by count, as far as this shard has heard. */
  isCounted(): boolean {
    return this.counted === true
  }

  /**
   * Places what this shard can without the coordinator: each placed rollout's step (a seat of a counted step is
   * reserved for it: the caller writes its row at once, then `SeatLease.use` or `giveBack`), or null (judge it again),
   * and the rest, which need `ask` first. `asked`: the coordinator has just answered, so its step stands whatever the
   * trainer step or the idle deadline says.
   */
  placeHere(fresh: readonly Fresh[], asked = false): { placed: Map<Fresh, number | null>; pending: Fresh[] } {
    const placed = new Map<Fresh, number | null>()
    const current = this.steps.current()
    if (current === undefined || this.announcedIn !== current || this.counted === undefined)
      return { placed, pending: [...fresh] }
    const pinned = this.steps.pinned(current)
    if (!this.counted) {
      const trainerStep = Math.max(...fresh.map((submission) => submission.metadata.current_step))
      const overdue = this.idleDeadline !== undefined && Date.now() >= this.idleDeadline
      if (!asked && (trainerStep > this.steps.trainerStep(current) || overdue)) return { placed, pending: [...fresh] }
      for (const submission of fresh)
        placed.set(submission, submission.judged.rubricVersion === pinned ? current : null)
      return { placed, pending: [] }
    }
    const pending: Fresh[] = []
    for (const submission of fresh) {
      if (submission.judged.rubricVersion !== pinned) placed.set(submission, null)
      else if (this.lease.reserve(current)) placed.set(submission, current)
      else pending.push(submission)
    }
    return { placed, pending }
  }

  /**
   * Asks the coordinator where `pending` go (an announce; a lease of seats when steps close by count), so that
   * `placeHere` can place them. `PlacementRefused` when a budget of the run refuses them; false when the coordinator
   * could not be asked (`ASK_ATTEMPTS` times).
   */
  async ask(pending: readonly Fresh[]): Promise<boolean> {
    try {
      await this.askTogether(
        pending.map((submission) => submission.judged.rubricVersion),
        Math.max(...pending.map((submission) => submission.metadata.current_step)),
      )
      return true
    } catch (error) {
      if (error instanceof PlacementRefused) throw error
      console.error(`[${this.parts.address().runId}] the coordinator could not be asked for a place`, error)
      return false
    }
  }

  /**
   * One ask of the coordinator for these rollouts. Requests that need it while an ask is in flight go together in the
   * next one: under load a shard makes one call per round trip, not one per request.
   */
  private askTogether(versions: number[], trainerStep: number): Promise<void> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ versions, trainerStep, done: (error) => (error ? reject(error) : resolve()) })
      if (this.waiting.length === 1 && !this.asking) void this.askWaiting()
    })
  }

  private async askWaiting(): Promise<void> {
    this.asking = true
    while (this.waiting.length > 0) {
      const asks = this.waiting.splice(0)
      let failure: unknown
      try {
        await this.announce(
          asks.flatMap((one) => one.versions),
          Math.max(...asks.map((one) => one.trainerStep)),
        )
      } catch (error) {
        failure = error
      }
      for (const one of asks) one.done(failure)
    }
    this.asking = false
  }

  private async announce(versions: number[], trainerStep: number): Promise<void> {
    const address = this.parts.address()
    let reply: CoordinatorReply | undefined
    for (let attempt = 1; !reply; attempt++) {
      const current = this.steps.current()
      const ask: Announce = {
        instanceId: address.instanceId,
        shard: address.shard,
        shardStep: current ?? -1,
        trainerStep,
        newestVersion: await this.parts.newestVersion(),
        versions,
        ...(current === undefined ? {} : { leased: this.lease.leased(current), taken: this.lease.taken(current) }),
      }
      try {
        reply = await this.parts.announce(ask)
      } catch (error) {
        if (attempt >= ASK_ATTEMPTS) throw error
      }
    }
    this.parts.applyReply(reply)
    // Not announced: the next rollouts ask again (the step may have closed, leaving room).
    if (reply.refused) throw new PlacementRefused(reply.refused)
    this.counted = reply.counted === true
    this.announcedIn = reply.step
    // Kept for lookups after a wake: each step's version, and the highest trainer step announced in it.
    if (reply.version !== undefined) this.steps.pin(reply.step, reply.version, this.counted ? -1 : trainerStep)
    if (reply.leased !== undefined) this.lease.heard(reply.step, reply.leased)
  }
}
