/**
 * What makes a parsed JSON document unsafe to hand to recursive code (zod, hashing, the credential scrub): nesting past
 * MAX_JSON_DEPTH, prototype keys, lone surrogates. The Worker checks request bodies with it, the CLI the files it
 * reads.
 */
/** Deepest nesting of arrays and objects a JSON body may have; deeper input overflows recursive code downstream. */
export const MAX_JSON_DEPTH = 64

/** Keys that could reach an object's prototype once spread or assigned, so no body may carry them. */
const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype'])

/**
 * A UTF-16 surrogate without its partner: it has no UTF-8 form, so D1, hashes and the judge would each see something
 * else.
 */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

/**
 * What makes a parsed JSON value unsafe to hand on, or undefined: nesting deeper than {@link MAX_JSON_DEPTH}, a
 * forbidden key, or (when `checkStrings`) a lone surrogate; `what` names the document in the message. Iterative, so
 * hostile nesting cannot overflow it.
 * @example jsonHazard(JSON.parse('{"__proto__": {}}'), false) // 'the key "__proto__" is not allowed (at (body))'
 */
export function jsonHazard(value: unknown, checkStrings: boolean, what = 'the body'): string | undefined {
  // Paths are built only when reporting, from parent links, so a clean body costs one small object per node.
  type Item = { value: unknown; depth: number; key: string; parent: Item | undefined }
  const where = (item: Item | undefined): string => {
    const keys: string[] = []
    for (let at = item; at?.parent; at = at.parent) keys.push(at.key)
    return keys.reverse().join('.') || '(body)'
  }
  const stack: Item[] = [{ value, depth: 0, key: '', parent: undefined }]
  while (stack.length > 0) {
    const item = stack.pop()!
    const node = item.value
    if (typeof node === 'string') {
      if (checkStrings && LONE_SURROGATE.test(node))
        return `the text at ${where(item)} holds a lone UTF-16 surrogate, which has no UTF-8 form`
      continue
    }
    if (typeof node !== 'object' || node === null) continue
    if (item.depth >= MAX_JSON_DEPTH)
      return `${what} nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels (at ${where(item)})`
    if (Array.isArray(node)) {
      for (let index = 0; index < node.length; index++)
        stack.push({ value: node[index], depth: item.depth + 1, key: String(index), parent: item })
      continue
    }
    for (const key of Object.keys(node)) {
      if (FORBIDDEN_KEYS.has(key)) return `the key "${key}" is not allowed (at ${where(item)})`
      if (checkStrings && LONE_SURROGATE.test(key))
        return `a key at ${where(item)} holds a lone UTF-16 surrogate, which has no UTF-8 form`
      stack.push({ value: (node as Record<string, unknown>)[key], depth: item.depth + 1, key, parent: item })
    }
  }
  return undefined
}
