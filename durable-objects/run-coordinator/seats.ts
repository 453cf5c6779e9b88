import { pLimit } from '../../src/llm/index.ts'
import type { RunConfig } from '../../src/schemas/run-config.ts'
import type { Announce } from '../contracts.ts'
import { ledgerName } from '../names.ts'
import type { StepLifecycle } from './lifecycle.ts'
import type { StepRows } from './step-rows.ts'

/** Shards asked at once when the seats of the collecting step are counted again after a wake. */
const COUNT_FAN_OUT = 32

type Given = { step: number; total: number; byShard: Map<string, number> }

/**
 * Counted steps (`rollouts_per_step`): each new rollout takes a seat in the collecting step before its shard records
 * it, so the step it is answered with is the step it stays in, and the step closes on its N-th seat. A rollout judged
 * on another rubric version than the step's gets no seat (its shard has it judged again). Seats given are counted in
 * memory (a seat writes nothing); after a wake the collecting step's are counted again from its shards' rows.
 * @example const steps = await seats.take(config, announce) // [3, 3, 4, null]: seats in steps 3 and 4, one to re-judge
 */
export class Seats {
  private given: Given | undefined
  private counting: Promise<Given> | undefined

  constructor(
    private readonly env: Cloudflare.Env,
    private readonly runId: () => string,
    private readonly rows: StepRows,
    private readonly lifecycle: StepLifecycle,
  ) {}

  /**
   * A seat for each of `announce.versions`, in order: its step, or null when that step is on another version. The
   * step closes on its `rollouts_per_step`-th seat.
   */
  async take(config: RunConfig, announce: Announce): Promise<(number | null)[]> {
    const perStep = config.rollouts_per_step!
    let given = await this.collecting()
    const key = `${announce.instanceId}\u0000${announce.shard}`
    // The shard takes part in each step it gets a seat in, and in the collecting one: that fixes the version it is
    // answered with for the step, the one its rollouts are judged on from then.
    const pins = new Map<number, number>()
    const pinOf = (step: number) => {
      const known = pins.get(step)
      if (known !== undefined) return known
      const pinned = this.rows.pinnedVersion(step, announce.instanceId, announce.newestVersion)
      this.rows.registerShard(step, announce.instanceId, announce.shard, pinned)
      pins.set(step, pinned)
      return pinned
    }
    const placed = (announce.versions ?? []).map((version) => {
      const { step } = given
      if (version !== pinOf(step)) return null
      given.total++
      given.byShard.set(key, (given.byShard.get(key) ?? 0) + 1)
      if (given.total >= perStep) {
        this.lifecycle.close(
          config,
          step,
          'count',
          [...given.byShard].map(([shardKey, keep]) => ({ ...parse(shardKey), keep })),
        )
        given = this.given = { step: this.rows.openCollecting(), total: 0, byShard: new Map() }
      }
      return step
    })
    pinOf(given.step)
    return placed
  }

  /** The seats given in the collecting step: in memory, or counted from its shards after a wake. */
  private async collecting(): Promise<Given> {
    const step = this.rows.openCollecting()
    if (this.given?.step === step) return this.given
    this.counting ??= this.count(step).finally(() => (this.counting = undefined))
    const counted = await this.counting
    // Another take may have moved on while the shards were counted: its count stands.
    if (this.given?.step !== this.rows.collecting()) this.given = counted
    return this.given
  }

  private async count(step: number): Promise<Given> {
    const limit = pLimit(COUNT_FAN_OUT)
    const runId = this.runId()
    const held = await Promise.all(
      this.rows.shards(step).map((row) =>
        limit(async () => {
          const ledger = this.env.LEDGER.getByName(ledgerName(runId, row.instance_id, row.shard))
          return [`${row.instance_id}\u0000${row.shard}`, await ledger.heldIn(step)] as const
        }),
      ),
    )
    return { step, total: held.reduce((sum, [, n]) => sum + n, 0), byShard: new Map(held) }
  }
}

function parse(shardKey: string): { instanceId: string; shard: number } {
  const [instanceId, shard] = shardKey.split('\u0000')
  return { instanceId: instanceId!, shard: Number(shard) }
}
