import type { MiddlewareHandler } from 'hono'
import type { z } from 'zod'
import { AppError } from '../../src/errors/index.ts'
import { jsonHazard, MAX_JSON_DEPTH } from '../../src/json-hazard/index.ts'

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
