/**
 * The items in groups by key, each group in the items' order, the groups in the order their first item came.
 * @example groupBy(rollouts, (rollout) => rollout.shard) // Map { 0 => [r1, r4], 3 => [r2] }
 */
export function groupBy<T, K>(items: Iterable<T>, keyOf: (item: T) => K): Map<K, T[]> {
  const groups = new Map<K, T[]>()
  for (const item of items) {
    const key = keyOf(item)
    const group = groups.get(key)
    if (group) group.push(item)
    else groups.set(key, [item])
  }
  return groups
}
