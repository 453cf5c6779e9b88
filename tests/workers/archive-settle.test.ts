/**
 * A sync step goes to the archive once its rows are final: while a row may still be settled on the rubrics its
 * step's update left, the archive waits, but never past the trainer's wait (`max_wait_s`) after that update.
 */
import { env } from 'cloudflare:workers'
import { runDurableObjectAlarm, runInDurableObject } from 'cloudflare:test'
import { describe, expect, it, vi } from 'vitest'
import { ledgerName } from '../../durable-objects/names.ts'
import { METADATA, call, createRun, resetObject, rollout } from './helpers.ts'

const RUBRICS = { anchor_rubrics: [{ id: 'a-correct', text: 'The final answer is correct.' }] }
const MAX_WAIT_S = 60

const archivedKeys = async (runId: string) =>
  (await env.ARCHIVE!.list({ prefix: `runs/${runId}/steps/` })).objects.map((object) => object.key)

describe('the archive of a sync step', () => {
  it('waits while a row may still be settled, and goes once the trainer wait after the update is over', async () => {
    const run = await createRun({
      ...RUBRICS,
      mode: 'sync',
      archive: true,
      rollouts_per_step: 1,
      max_wait_s: MAX_WAIT_S,
      ledger_shards: 1,
      ledger_retention_steps: 5,
    })
    const scored = await call('POST', '/score', {
      token: run.token,
      body: { rollout: rollout('a'), metadata: METADATA },
    })
    expect(scored.status, scored.text).toBe(200)
    await vi.waitFor(async () => expect(await archivedKeys(run.runId)).toHaveLength(1), { timeout: 10_000 })
    const [key] = await archivedKeys(run.runId)
    const shard = () => env.LEDGER.getByName(ledgerName(run.runId, 'global', 0))
    // Step 0 as it stood before its row settled: archived nothing yet, its row on the version before the update's.
    const unsettledSince = async (updatedAt: number) => {
      await env.ARCHIVE!.delete(key!)
      await runInDurableObject(shard(), async (_object, state) => {
        const sql = state.storage.sql
        sql.exec("DELETE FROM meta WHERE key = 'archived_through'")
        sql.exec('UPDATE ledger SET final = 0, rubric_version = rubric_version - 1 WHERE step = 0')
        sql.exec('UPDATE shard_steps SET updated_at = ? WHERE step = 0', updatedAt)
        await state.storage.setAlarm(Date.now() + 60_000)
      })
      await resetObject(shard())
      expect(await runDurableObjectAlarm(shard())).toBe(true)
      return archivedKeys(run.runId)
    }
    expect(await unsettledSince(Date.now())).toEqual([])
    expect(await unsettledSince(Date.now() - (MAX_WAIT_S + 1) * 1_000)).toEqual([key])
  })
})
