import type { RubricSnapshot } from '../../src/schemas/rubric.ts'
import type { MetaStore } from '../meta-store.ts'

/** What the shard asks its rubric instance: the rubrics in force, or older versions by number. */
export interface InstanceRubrics {
  snapshot(): Promise<RubricSnapshot>
  versions(versions: number[]): Promise<Record<number, RubricSnapshot['rubrics']>>
}

/**
 * A shard's copy of its instance's rubrics: the newest it knows (kept in storage, so a wake needs no call) and the
 * older versions it was asked to score a step on (rare: read from the instance, held in memory).
 * @example const snapshot = await snapshots.of(pinned) // the rubrics a step's rollouts are judged on
 */
export class ShardSnapshots {
  private newest: RubricSnapshot | undefined
  private readonly older = new Map<number, RubricSnapshot>()

  constructor(
    private readonly meta: MetaStore,
    private readonly instance: () => InstanceRubrics,
    private readonly instanceId: () => string,
  ) {}

  /** The newest rubrics this shard knows, read from the instance on its first use. */
  async current(): Promise<RubricSnapshot> {
    const known = this.known()
    if (known) return known
    const fetched = await this.instance().snapshot()
    // Another call may have stored a newer one while this one waited.
    return this.offer(fetched)
  }

  /** Keeps `snapshot` when it is newer than the copy; answers the newest. */
  offer(snapshot: RubricSnapshot): RubricSnapshot {
    const known = this.known()
    if (known && known.version >= snapshot.version) return known
    this.meta.set('snapshot', JSON.stringify(snapshot))
    return (this.newest = snapshot)
  }

  /** The rubrics of one version: the newest copy, or an older one asked of the instance once. */
  async of(version: number): Promise<RubricSnapshot> {
    const current = await this.current()
    if (current.version === version) return current
    const held = this.older.get(version)
    if (held) return held
    const rubrics = (await this.instance().versions([version]))[version]
    if (!rubrics) throw new Error(`instance ${this.instanceId()} has no rubric version ${version}`)
    const snapshot = { instance_id: this.instanceId(), version, rubrics }
    if (version > current.version) return this.offer(snapshot)
    this.older.set(version, snapshot)
    return snapshot
  }

  private known(): RubricSnapshot | undefined {
    if (this.newest) return this.newest
    const stored = this.meta.get('snapshot')
    return stored === undefined ? undefined : (this.newest = JSON.parse(stored) as RubricSnapshot)
  }
}
