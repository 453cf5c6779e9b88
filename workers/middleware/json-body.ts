import type { MiddlewareHandler } from 'hono'
import { z } from 'zod'
import { AppError } from '../../src/errors/index.ts'

/**
 * Validates a JSON request body against a zod schema and stores the parsed value for the handler.
 * Wrong content type → 415, unparseable JSON → 400 `invalid_json`, schema mismatch → 400
 * `invalid_request` whose details list every field at fault.
 * @example app.post('/score', jsonBody(ScoreRequest), (c) => c.json(c.get('body')))
 */
export function jsonBody<T extends z.ZodType>(schema: T): MiddlewareHandler<{ Variables: { body: z.infer<T> } }> {
  return async function validateJsonBody(c, next) {
    const contentType = c.req.header('content-type') ?? ''
    if (!/^application\/([\w.+-]+\+)?json\b/i.test(contentType)) {
      throw new AppError('unsupported_media_type', `send the body as JSON with content-type: application/json (got "${contentType || 'none'}")`)
    }
    let raw: unknown
    try {
      raw = JSON.parse(await c.req.text())
    } catch (error) {
      throw new AppError('invalid_json', `the request body is not valid JSON: ${(error as Error).message}`)
    }
    const parsed = schema.safeParse(raw)
    if (!parsed.success) {
      const details = parsed.error.issues.map((issue) => ({ path: issue.path.join('.') || '(body)', message: issue.message }))
      const summary = details.slice(0, 3).map((d) => `${d.path}: ${d.message}`).join('; ')
      throw new AppError('invalid_request', `the request body does not match the expected shape — ${summary}`, { details })
    }
    c.set('body', parsed.data)
    await next()
  }
}
