/**
 * Splits a list into consecutive batches of at most `size` items, for backends with a batch limit.
 * @example chunk([1, 2, 3], 2) // [[1, 2], [3]]
 */
export function chunk<T>(items: readonly T[], size: number): T[][] {
  if (!Number.isInteger(size) || size < 1) throw new RangeError(`batch size must be a positive integer, got ${size}`)
  const batches: T[][] = []
  for (let start = 0; start < items.length; start += size) batches.push(items.slice(start, start + size))
  return batches
}
