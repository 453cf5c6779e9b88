import type { RunConfig } from '../schemas/run-config.ts'
import { RubricSeed, type Rubric } from '../schemas/rubric.ts'

/**
 * The first rubric set of an instance: the run's anchors, then the instance's own seeds when the
 * config names it, else the run's adaptive rubrics. Ids are filled in as `anchor-N` / `adaptive-N`.
 * @example initialRubrics(config, 'global', '2026-01-01T00:00:00.000Z')
 */
export function initialRubrics(config: RunConfig, instanceId: string, createdAt: string): Rubric[] {
  // hasOwn: an instance id such as "constructor" must not find Object.prototype's member.
  const adaptive =
    (Object.hasOwn(config.instance_rubrics, instanceId) ? config.instance_rubrics[instanceId] : undefined) ??
    config.adaptive_rubrics
  const build = (seeds: readonly RubricSeed[], isAnchor: boolean): Rubric[] =>
    seeds.map((raw, index) => {
      const seed = RubricSeed.parse(raw)
      return {
        id: seed.id ?? `${isAnchor ? 'anchor' : 'adaptive'}-${index + 1}`,
        text: seed.text,
        weight: seed.weight,
        ...(seed.kind === 'penalty' ? { kind: 'penalty' as const } : {}),
        is_anchor: isAnchor,
        version: 1,
        created_at: createdAt,
        metadata: seed.metadata,
      }
    })
  const rubrics = [...build(config.anchor_rubrics, true), ...build(adaptive, false)]
  if (rubrics.length === 0) throw new RangeError(`instance "${instanceId}" would start with no rubrics`)
  return rubrics
}
