/** Quantised components are integers in −127…127: a unit vector's components times 127, rounded. */
const INT8_SCALE = 127

/**
 * A vector scaled to unit length, then to int8 (×127, rounded): a quarter of float32's bytes, cosine within ~1%.
 * @example quantizeVector([3, 4]) // Int8Array [76, 102]
 */
export function quantizeVector(values: ArrayLike<number>): Int8Array {
  let sum = 0
  for (let i = 0; i < values.length; i++) sum += values[i]! * values[i]!
  const scale = sum > 0 ? INT8_SCALE / Math.sqrt(sum) : 0
  const codes = new Int8Array(values.length)
  for (let i = 0; i < values.length; i++)
    codes[i] = Math.max(-INT8_SCALE, Math.min(INT8_SCALE, Math.round(values[i]! * scale)))
  return codes
}

/**
 * The stored form of a vector: its int8 codes as bytes, one per dimension, in a buffer of its own
 * (so `.buffer` can be bound as a BLOB in DO SQLite or D1). `ExactVectorIndex.load` reads it back unchanged.
 * @example sql.exec('INSERT INTO vectors (id, vector) VALUES (?, ?)', id, serializeVector(vector).buffer)
 */
export function serializeVector(values: ArrayLike<number>): Uint8Array {
  return new Uint8Array(quantizeVector(values).buffer)
}

/**
 * The int8 codes inside stored bytes, without copying.
 * @example const codes = vectorCodes(row.vector as ArrayBuffer)
 */
export function vectorCodes(bytes: Uint8Array | ArrayBuffer): Int8Array {
  return bytes instanceof ArrayBuffer
    ? new Int8Array(bytes)
    : new Int8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)
}

/**
 * A stored vector back as a unit float vector (for re-indexing elsewhere, e.g. into Vectorize).
 * @example const vector = deserializeVector(serializeVector([3, 4])) // ≈ Float32Array [0.6, 0.8]
 * @internal
 */
export function deserializeVector(bytes: Uint8Array | ArrayBuffer): Float32Array {
  const codes = vectorCodes(bytes)
  let sum = 0
  for (let i = 0; i < codes.length; i++) sum += codes[i]! * codes[i]!
  const scale = sum > 0 ? 1 / Math.sqrt(sum) : 0
  return Float32Array.from(codes, (code) => code * scale)
}
