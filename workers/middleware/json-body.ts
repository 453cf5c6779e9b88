import type { MiddlewareHandler } from 'hono'
import type { z } from 'zod'
import { AppError } from '../../src/errors/index.ts'

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
 * Validates a JSON request body against a zod schema and stores the parsed value for the handler.
 * Wrong content type → 415; bytes that are not UTF-8 or text that is not JSON → 400 `invalid_json`; nesting deeper
 * than {@link MAX_JSON_DEPTH}, a `__proto__`/`constructor`/`prototype` key or a lone surrogate → 400
 * `invalid_request`; schema mismatch → 400 `invalid_request` whose details list every field at fault.
 * @example app.post('/score', jsonBody(ScoreRequest), (c) => c.json(c.get('body')))
 */
export function jsonBody<T extends z.ZodType>(schema: T): MiddlewareHandler<{ Variables: { body: z.infer<T> } }> {
  return async function validateJsonBody(c, next) {
    const contentType = c.req.header('content-type') ?? ''
    if (!/^application\/([\w.+-]+\+)?json\b/i.test(contentType)) {
      throw new AppError(
        'unsupported_media_type',
        `send the body as JSON with content-type: application/json (got "${contentType || 'none'}")`,
      )
    }
    let text: string
    try {
      // `fatal`: a replacement character would silently change what the client sent.
      text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(await c.req.arrayBuffer())
    } catch {
      throw new AppError('invalid_json', 'the request body is not valid UTF-8')
    }
    let raw: unknown
    try {
      raw = JSON.parse(text)
    } catch (error) {
      throw new AppError('invalid_json', `the request body is not valid JSON: ${(error as Error).message}`)
    }
    // Surrogates only arrive as \u escapes (the decoder refused encoded ones), so plain bodies skip the string scan.
    const hazard = jsonHazard(raw, text.includes('\\u'))
    if (hazard) throw new AppError('invalid_request', hazard)
    const parsed = schema.safeParse(raw)
    if (!parsed.success) {
      const details = parsed.error.issues.map((issue) => ({
        path: issue.path.join('.') || '(body)',
        message: issue.message,
      }))
      const summary = details
        .slice(0, 3)
        .map((d) => `${d.path}: ${d.message}`)
        .join('; ')
      throw new AppError('invalid_request', `the request body does not match the expected shape — ${summary}`, {
        details,
      })
    }
    c.set('body', parsed.data)
    await next()
  }
}

/**
 * What makes a parsed JSON value unsafe to hand on, or undefined: nesting deeper than {@link MAX_JSON_DEPTH}, a
 * forbidden key, or (when `checkStrings`) a lone surrogate. Iterative, so hostile nesting cannot overflow it.
 * @example jsonHazard(JSON.parse('{"__proto__": {}}'), false) // 'the key "__proto__" is not allowed (at (body))'
 */
function jsonHazard(value: unknown, checkStrings: boolean): string | undefined {
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
      return `the body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels (at ${where(item)})`
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
