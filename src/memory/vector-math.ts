/**
 * A copy of `values` scaled to unit length; an all-zero vector stays all zero.
 * @example normalizeVector([3, 4]) // Float32Array [0.6, 0.8]
 */
export function normalizeVector(values: ArrayLike<number>): Float32Array {
  return normalizeInPlace(Float32Array.from(values))
}

/**
 * Scales `vector` itself to unit length (an all-zero vector stays all zero) and returns it.
 * @example normalizeInPlace(new Float32Array([3, 4])) // Float32Array [0.6, 0.8]
 */
export function normalizeInPlace(vector: Float32Array): Float32Array {
  let sum = 0
  for (let i = 0; i < vector.length; i++) sum += vector[i]! * vector[i]!
  if (sum === 0) return vector
  const scale = 1 / Math.sqrt(sum)
  for (let i = 0; i < vector.length; i++) vector[i]! *= scale
  return vector
}

/**
 * The dot product of two equally long vectors: their cosine similarity when both are unit length.
 * @example dotProduct([0.6, 0.8], [1, 0]) // 0.6
 * @internal
 */
export function dotProduct(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new RangeError(`vectors differ in length: ${a.length} and ${b.length}`)
  let sum = 0
  for (let i = 0; i < a.length; i++) sum += a[i]! * b[i]!
  return sum
}
