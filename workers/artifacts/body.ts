import type { MiddlewareHandler } from 'hono'
import type { z } from 'zod'
import { jsonBody } from '../middleware/json-body.ts'

/**
 * `jsonBody`, except that an empty body counts as `{}` (for routes whose every field is optional, such as
 * rollback: `curl -X POST …/rollback` works).
 * @example app.post('/admin/targets/:target/rollback', optionalJsonBody(RollbackRequest), handler)
 */
export function optionalJsonBody<T extends z.ZodType>(schema: T): MiddlewareHandler<{ Variables: { body: z.infer<T> } }> {
  const strict = jsonBody(schema)
  return async function validateOptionalJsonBody(c, next) {
    if ((await c.req.text()).trim() === '') {
      c.set('body', schema.parse({}))
      return next()
    }
    return strict(c, next)
  }
}
