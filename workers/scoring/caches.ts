import { LRUCache } from 'lru-cache'
import type { Judgement } from '../../src/agents/scorer/index.ts'
import type { RubricSnapshot } from '../../src/schemas/rubric.ts'

/** Instances whose rubrics one isolate keeps (a few KB each). */
const SNAPSHOTS = 4_096
/** Judgements one isolate keeps (about 1 KB each). */
const JUDGEMENTS = 8_192

/** An instance's rubrics as an isolate holds them, and the latest trainer step a ledger shard confirmed them for. */
interface HeldSnapshot {
  snapshot: RubricSnapshot
  trainerStep: number
}

const snapshots = new LRUCache<string, HeldSnapshot>({ max: SNAPSHOTS })
const judgements = new LRUCache<string, Judgement>({ max: JUDGEMENTS })

/**
 * The isolate's copy of each instance's rubrics in force: what the ledger shards say the current step is scored on,
 * handed out with any reply to a caller that named another version. A copy is
 * trusted for the trainer steps a shard's reply confirmed it for: a request from a later trainer step (rubrics are
 * updated between steps) asks its shard first rather than spend a model call on rubrics that may be gone.
 * @example rubricCache.offer('grpo-1', 'global', reply.snapshot, 3)
 * @example rubricCache.current('grpo-1', 'global', 3)?.version
 */
export const rubricCache = {
  /** The held copy, if any, however old. */
  get(runId: string, instanceId: string): RubricSnapshot | undefined {
    return snapshots.get(instanceKey(runId, instanceId))?.snapshot
  },
  /** The held copy if a shard confirmed it at `trainerStep` or later. */
  current(runId: string, instanceId: string, trainerStep: number): RubricSnapshot | undefined {
    const held = snapshots.get(instanceKey(runId, instanceId))
    return held && held.trainerStep >= trainerStep ? held.snapshot : undefined
  },
  /**
   * What a shard's reply says: its snapshot when the caller's differed (`undefined` confirms the caller's). A
   * snapshot the shard's step is scored on (`pinned`) replaces the held copy whatever its version, so the isolate
   * judges on what the steps are scored on; the newest a shard merely knows replaces only an older copy.
   */
  offer(
    runId: string,
    instanceId: string,
    snapshot: RubricSnapshot | undefined,
    trainerStep: number,
    pinned = false,
  ): void {
    const key = instanceKey(runId, instanceId)
    const held = snapshots.get(key)
    const taken = snapshot && (pinned || !held || held.snapshot.version < snapshot.version) ? snapshot : held?.snapshot
    if (taken) snapshots.set(key, { snapshot: taken, trainerStep: Math.max(trainerStep, held?.trainerStep ?? -1) })
  },
}

/**
 * Judgements this isolate made, by rubric version and content (`judgementKey`): identical content under another
 * rollout id, or a retried batch, is answered without a model call.
 * @example judgementCache.get('grpo-1', 'global', 3, key) ?? await judge()
 */
export const judgementCache = {
  get(runId: string, instanceId: string, version: number, key: string): Judgement | undefined {
    return judgements.get(`${instanceKey(runId, instanceId)}\u0000${version}\u0000${key}`)
  },
  set(runId: string, instanceId: string, version: number, key: string, judgement: Judgement): void {
    judgements.set(`${instanceKey(runId, instanceId)}\u0000${version}\u0000${key}`, judgement)
  },
}

function instanceKey(runId: string, instanceId: string): string {
  return `${runId}\u0000${instanceId}`
}
