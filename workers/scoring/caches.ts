import { LRUCache } from 'lru-cache'
import type { Judgement } from '../../src/agents/scorer/index.ts'
import type { RubricSnapshot } from '../../src/schemas/rubric.ts'

/** Instances whose rubrics one isolate keeps (a few KB each). */
const SNAPSHOTS = 4_096
/** Judgements one isolate keeps (about 1 KB each). */
const JUDGEMENTS = 8_192

const snapshots = new LRUCache<string, RubricSnapshot>({ max: SNAPSHOTS })
const judgements = new LRUCache<string, Judgement>({ max: JUDGEMENTS })

/**
 * The isolate's copy of each instance's rubrics in force. Versions are immutable, so a copy is only ever replaced by
 * a newer one, which the ledger shards hand out with any reply to a caller that named an older version.
 * @example rubricCache.offer('grpo-1', 'global', reply.snapshot); rubricCache.get('grpo-1', 'global')?.version
 */
export const rubricCache = {
  get(runId: string, instanceId: string): RubricSnapshot | undefined {
    return snapshots.get(instanceKey(runId, instanceId))
  },
  offer(runId: string, instanceId: string, snapshot: RubricSnapshot | undefined): void {
    if (!snapshot) return
    const key = instanceKey(runId, instanceId)
    const held = snapshots.get(key)
    if (!held || held.version < snapshot.version) snapshots.set(key, snapshot)
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
