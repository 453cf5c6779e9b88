import type { MetaStore } from './meta-store.ts'

/**
 * The name a Durable Object was reached by (`durable-objects/names.ts` builds them all). The runtime hands it over as
 * `ctx.id.name` to every call through `getByName`, but the workerd this project pins leaves it out when it wakes an
 * object for its alarm, so an object with alarms keeps it once in its own storage for those wakes. Storage written
 * before the name was kept still names the object by its old keys (`legacy`).
 * @example const name = objectName(ctx, meta, () => meta.get('run_id') && coordinatorName(meta.get('run_id')!))
 */
export function objectName(ctx: DurableObjectState, meta: MetaStore, legacy: () => string | undefined): string {
  const given = ctx.id.name
  if (given !== undefined) {
    if (meta.get('name') !== given) meta.set('name', given)
    return given
  }
  const stored = meta.get('name') ?? legacy()
  if (stored === undefined) throw new Error(`Durable Object ${ctx.id.toString()} was woken without its name`)
  return stored
}
