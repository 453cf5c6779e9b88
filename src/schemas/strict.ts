/**
 * What a person writes is read strictly, what was stored is read leniently. A configuration a user writes (a run
 * config, a deployment's `llm`, an endpoints file) is {@link strict}: a misspelt key is refused with the
 * nearest known one, instead of being dropped while its default silently applies. A configuration read back from
 * storage goes through {@link parseStored}, which drops keys this version no longer knows, so a row written by an
 * older (or newer) version still loads.
 */
import { z } from 'zod'
import { nearestName } from '../text/index.ts'

/**
 * What to say about keys an object does not have: each with the nearest known key when one is a likely spelling,
 * and the known keys when one is not.
 * @example unknownKeysMessage(['rollout_per_step'], ['mode', 'rollouts_per_step']) // 'unknown key "rollout_per_step"
 *   (did you mean rollouts_per_step?)'
 */
export function unknownKeysMessage(keys: readonly string[], known: readonly string[]): string {
  let unmatched = false
  const named = keys.map((key) => {
    const nearest = nearestName(key, known)
    unmatched ||= nearest === undefined
    return nearest === undefined ? `"${key}"` : `"${key}" (did you mean ${nearest}?)`
  })
  const listed = unmatched ? `; the keys are ${known.join(', ')}` : ''
  return `unknown key${keys.length > 1 ? 's' : ''} ${named.join(', ')}${listed}`
}

/** zod's message for an `unrecognized_keys` issue, worded by {@link unknownKeysMessage}; other issues keep theirs. */
function unknownKeysError(issue: z.core.$ZodRawIssue): string | undefined {
  if (issue.code !== 'unrecognized_keys') return undefined
  const shape = (issue.inst as z.ZodObject | undefined)?.shape ?? {}
  return unknownKeysMessage(issue.keys, Object.keys(shape))
}

/**
 * The strict form of an object schema, whose unknown-key issue names the nearest known key: for objects a person
 * writes. Use it with `.apply` before any refinement (those of `schema` are not carried over).
 * @example const Knobs = z.object({ rollouts_per_step: z.number() }).apply(strict)
 *   Knobs.safeParse({ rollout_per_step: 8 }).error?.issues[0]?.message
 *   // 'unknown key "rollout_per_step" (did you mean rollouts_per_step?)'
 */
export function strict<Shape extends z.core.$ZodShape>(schema: z.ZodObject<Shape>): z.ZodObject<Shape, z.core.$strict> {
  return z.strictObject(schema.shape, { error: unknownKeysError })
}

/**
 * Parses a value read back from storage with a schema whose objects may be strict: keys no object of the schema
 * knows (left by another version) are dropped, every other check still applies.
 * @example parseStored(RunConfig, row.config) // a config stored with a key since removed still loads
 */
export function parseStored<Schema extends z.ZodType>(schema: Schema, value: unknown): z.output<Schema> {
  const first = schema.safeParse(value)
  if (first.success) return first.data
  const unknown = first.error.issues.filter((issue) => issue.code === 'unrecognized_keys')
  if (unknown.length === 0) throw first.error
  const copy = structuredClone(value)
  for (const issue of unknown) {
    let holder = copy as Record<PropertyKey, unknown>
    for (const key of issue.path) holder = holder[key] as Record<PropertyKey, unknown>
    for (const key of issue.keys) delete holder[key]
  }
  return schema.parse(copy)
}
