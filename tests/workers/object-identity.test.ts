/**
 * How a Durable Object knows its own name: from the runtime when it is given, else from its storage (an alarm's
 * wake), and never by guessing: an object with neither refuses to run, and a name that is not a run's is refused.
 */
import { env } from 'cloudflare:workers'
import { runInDurableObject } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import { objectName } from '../../durable-objects/identity.ts'
import { MetaStore } from '../../durable-objects/meta-store.ts'
import { runIdOf } from '../../durable-objects/names.ts'

/** A state as an alarm's wake hands it over: an id without its name. */
const wokenWithoutName = (state: DurableObjectState) =>
  ({ ...state, id: { name: undefined, toString: () => 'abc123' } }) as unknown as DurableObjectState

describe('objectName', () => {
  it('keeps a given name, answers it on a wake without one, and refuses a wake with none kept', async () => {
    const stub = env.LEDGER.getByName('identity-test')
    await runInDurableObject(stub, (_object, state) => {
      const sql = state.storage.sql
      sql.exec("DELETE FROM meta WHERE key = 'name'")
      const meta = new MetaStore(sql)
      expect(() => objectName(wokenWithoutName(state), meta, () => undefined)).toThrow(
        'Durable Object abc123 was woken without its name',
      )
      expect(objectName(wokenWithoutName(state), meta, () => 'run:old')).toBe('run:old')
      expect(objectName(state, meta, () => undefined)).toBe('identity-test')
      expect(objectName(wokenWithoutName(state), new MetaStore(sql), () => undefined)).toBe('identity-test')
    })
  })
})

describe('runIdOf', () => {
  it("reads the run id of a run's object name and refuses any other name by quoting it", () => {
    expect(runIdOf('run:r-1:inst:global:ledger:0')).toBe('r-1')
    expect(() => runIdOf('memory:x')).toThrow('"memory:x" is not a run\'s object name')
  })
})
