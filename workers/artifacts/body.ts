import type { MiddlewareHandler } from 'hono'
import type { z } from 'zod'
import { jsonBody } from '../middleware/json-body.ts'

/**
 * `jsonBody`, except that an empty body counts as `{}` (for routes whose every field is optional, such as
 * rollback: `curl -X POST …/rollback` works).
 * @example app.post('/admin/targets/:target/rollback', optionalJsonBody(RollbackRequest), handler)
 */
export function optionalJsonBody<T extends z.ZodType>(
  schema: T,
): MiddlewareHandler<{ Variables: { body: z.infer<T> } }> {
  const strict = jsonBody(schema)
  return async function validateOptionalJsonBody(c, next) {
    // Bytes, not text: jsonBody must still see them as sent (a decoded, re-encoded body would hide invalid UTF-8).
    if (
      new Uint8Array(await c.req.arrayBuffer()).every(
        (byte) => byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0d,
      )
    ) {
      c.set('body', schema.parse({}))
      return next()
    }
    return strict(c, next)
  }
}
