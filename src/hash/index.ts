export { derivedSeed, fnv1a, hash32, hashHex, hex8, mix32 } from './fnv.ts'
export { Rng, type RngState, seededRandom, shuffle } from './random.ts'

const encoder = new TextEncoder()

/**
 * `node:crypto`'s createHash where the runtime hands it out synchronously (`process.getBuiltinModule`: Node, and
 * workerd under `nodejs_compat`); the digest is the same.
 */
type CreateHash = (algorithm: 'sha256') => { update(text: string): { digest(encoding: 'hex'): string } }
const createHash = (
  globalThis as { process?: { getBuiltinModule?: (id: string) => { createHash?: CreateHash } | undefined } }
).process?.getBuiltinModule?.('node:crypto')?.createHash

/**
 * Hex SHA-256 of a string: in place with `node:crypto` where the runtime offers it (Node's Web Crypto digest goes
 * through the libuv thread pool: about 4× the CPU of the hash itself for a prompt-sized text), else with Web Crypto.
 * @example await sha256Hex('abc') // 'ba7816bf…'
 */
export async function sha256Hex(text: string): Promise<string> {
  if (createHash) return createHash('sha256').update(text).digest('hex')
  return toHex(new Uint8Array(await crypto.subtle.digest('SHA-256', encoder.encode(text))))
}

/**
 * Lowercase hex of bytes.
 * @example toHex(new Uint8Array([0, 255])) // '00ff'
 */
export function toHex(bytes: Uint8Array): string {
  let hex = ''
  for (const byte of bytes) hex += HEX_OF_BYTE[byte]
  return hex
}

const HEX_OF_BYTE = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, '0'))

/**
 * JSON with object keys sorted at every depth, so equal values always hash alike.
 * @example canonicalJson({ b: 1, a: [2, { d: 3, c: 4 }] }) // '{"a":[2,{"c":4,"d":3}],"b":1}'
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(withSortedKeys(value, ''))
}

const byKey = ([a]: [string, unknown], [b]: [string, unknown]) => (a < b ? -1 : a > b ? 1 : 0)

/**
 * A copy of `value` whose objects have their keys in sorted order (`toJSON` applied first, as JSON.stringify does),
 * for one native JSON.stringify: a replacer would be a JavaScript call for every string and number of the value.
 */
function withSortedKeys(value: unknown, key: string): unknown {
  const toJSON =
    value !== null && (typeof value === 'object' || typeof value === 'function')
      ? (value as { toJSON?: unknown }).toJSON
      : undefined
  const plain: unknown = typeof toJSON === 'function' ? toJSON.call(value, key) : value
  if (plain === null || typeof plain !== 'object') return plain
  if (Array.isArray(plain)) return plain.map((item, index) => withSortedKeys(item, String(index)))
  const entries = Object.entries(plain as Record<string, unknown>).sort(byKey)
  for (const entry of entries) entry[1] = withSortedKeys(entry[1], entry[0])
  return Object.fromEntries(entries)
}

/**
 * The stable instance id of a prompt in `per_instance` mode: the same input always lands in the same instance.
 * @example await instanceIdForInput('What is 2+2?') // 'in-3f1c…' (16 hex digits)
 */
export async function instanceIdForInput(input: string): Promise<string> {
  return `in-${(await sha256Hex(input)).slice(0, 16)}`
}
