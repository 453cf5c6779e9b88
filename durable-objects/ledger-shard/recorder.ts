import { STORED_ROLLOUT_MAX_BYTES, storedRolloutBytes } from '../../src/schemas/rollout.ts'
import type { LedgerEntry, ShardAnswer, Submission } from '../contracts.ts'
import { KeyedTurns } from './keyed-turns.ts'
import { type Fresh, type Placement, PlacementRefused } from './placement.ts'
import type { LedgerRows } from './rows.ts'
import type { SeatLease } from './seat-lease.ts'
import type { ShardSteps } from './steps.ts'

/**
 * The ledger shard's write path: one row per rollout id and step, whatever a request holds and however requests
 * overlap. Copies of one id in a request are one rollout (the first judged copy stands for them); a request that
 * holds an id already in flight waits for it and gets its answer; a rollout too large to store, or whose row fails,
 * fails alone, and a seat that produced no row is given back. Answers come back in the submissions' order.
 * @example const answers = await recorder.record(submissions) // [{ kind: 'recorded', entry, duplicate: false }, …]
 */
export class Recorder {
  private readonly turns = new KeyedTurns()

  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly rows: LedgerRows,
    private readonly steps: ShardSteps,
    private readonly placement: Placement,
    private readonly lease: SeatLease,
    /** A row was written in `step`: the shard's tally and report hear of it. */
    private readonly inserted: (entry: LedgerEntry, submission: Submission) => void,
  ) {}

  /** Records the judged submissions that are new, answers the rest; see the class. */
  async record(submissions: readonly Submission[]): Promise<ShardAnswer[]> {
    const ids = [...new Set(submissions.map((submission) => submission.rollout.id))]
    return this.turns.run(ids, async () => {
      const standing = standIns(submissions)
      const answers = new Map<string, ShardAnswer>()
      const fresh: Fresh[] = []
      for (const [id, submission] of standing) {
        const earlier = this.recorded(id)
        if (earlier) answers.set(id, { kind: 'recorded', entry: earlier, duplicate: true })
        else if (!submission.judged) answers.set(id, { kind: 'judge' })
        else if (storedRolloutBytes(submission) > STORED_ROLLOUT_MAX_BYTES)
          answers.set(id, tooLarge(storedRolloutBytes(submission)))
        else fresh.push(submission as Fresh)
      }
      for (const [id, answer] of await this.placeAndWrite(fresh)) answers.set(id, answer)
      return submissions.map((submission) => {
        const answer = answers.get(submission.rollout.id)!
        // The other copies of a rollout the request holds are that rollout: its entry, as a duplicate.
        if (answer.kind === 'recorded' && standing.get(submission.rollout.id) !== submission)
          return { ...answer, duplicate: true }
        return answer
      })
    })
  }

  /** The rollout's entry in the current step or the late-retry window before it. */
  private recorded(rolloutId: string): LedgerEntry | undefined {
    const current = this.steps.current()
    return current === undefined ? undefined : this.rows.entryNear(current, rolloutId)
  }

  /**
   * Places the fresh rollouts and writes their rows, round by round: what the shard can place on its own is written
   * at once (in the same turn, so a seat is never reserved across a wait), then the coordinator is asked for the rest.
   * What still has no seat after `ASK_ROUNDS` asks is answered "retry".
   */
  private async placeAndWrite(fresh: readonly Fresh[]): Promise<Map<string, ShardAnswer>> {
    const answers = new Map<string, ShardAnswer>()
    let pending: readonly Fresh[] = fresh
    for (let round = 0; pending.length > 0; round++) {
      const here = this.placement.placeHere(pending, round > 0)
      this.storage.transactionSync(() => {
        for (const [submission, step] of here.placed) answers.set(submission.rollout.id, this.write(submission, step))
      })
      pending = here.pending
      if (pending.length === 0 || round >= ASK_ROUNDS) break
      try {
        if (!(await this.placement.ask(pending))) break
      } catch (error) {
        if (!(error instanceof PlacementRefused)) throw error
        for (const submission of pending)
          answers.set(submission.rollout.id, { kind: 'refused', refusal: error.refusal })
        return answers
      }
    }
    for (const submission of pending) answers.set(submission.rollout.id, NO_SEAT)
    return answers
  }

  /** One placed rollout's row, or why it has none; a seat it reserved is used or given back either way. */
  private write(submission: Fresh, step: number | null): ShardAnswer {
    if (step === null) return { kind: 'judge' }
    const counted = this.placement.isCounted()
    try {
      const entry = this.rows.insert(step, submission)
      if (counted) this.lease.use(step)
      this.inserted(entry, submission)
      return { kind: 'recorded', entry, duplicate: false }
    } catch (error) {
      if (counted) this.lease.giveBack(step)
      console.error(`rollout ${JSON.stringify(submission.rollout.id)} could not be recorded`, error)
      return { kind: 'failed', code: 'internal', message: 'the ledger could not record the rollout' }
    }
  }
}

/** Asks of the coordinator one request may make before its rollouts without a seat are answered "retry". */
const ASK_ROUNDS = 4

const NO_SEAT: ShardAnswer = {
  kind: 'failed',
  code: 'overloaded',
  message: 'no seat of the counted step could be had now; retry after the delay',
}

/** Each rollout id of the submissions once, by the copy that stands for it: the first judged one, else the first. */
function standIns(submissions: readonly Submission[]): Map<string, Submission> {
  const standing = new Map<string, Submission>()
  for (const submission of submissions) {
    const known = standing.get(submission.rollout.id)
    if (!known || (!known.judged && submission.judged)) standing.set(submission.rollout.id, submission)
  }
  return standing
}

function tooLarge(bytes: number): ShardAnswer {
  return {
    kind: 'failed',
    code: 'payload_too_large',
    message:
      `the rollout takes ${bytes} bytes as stored (JSON, UTF-8, escapes included); at most ` +
      `${STORED_ROLLOUT_MAX_BYTES} fit a ledger row`,
  }
}
