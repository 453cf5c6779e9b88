import type { MiddlewareHandler } from 'hono'
import type { z } from 'zod'
import { limitOf } from '../../src/schemas/trajectory.ts'
import { AppError } from '../../src/errors/index.ts'
import { jsonHazard, MAX_JSON_DEPTH } from '../../src/json-hazard/index.ts'

/**
 * Validates a JSON request body against a zod schema and stores the parsed value for the handler.
 * Wrong content type → 415; bytes that are not UTF-8 or text that is not JSON → 400 `invalid_json`; nesting deeper
 * than {@link MAX_JSON_DEPTH}, a `__proto__`/`constructor`/`prototype` key or a lone surrogate → 400
 * `invalid_request`; schema mismatch → 400 `invalid_request` whose details list every field at fault, or 413
 * `payload_too_large` naming the limit when the body breaks one the schema declares ({@link invalidBody}).
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
    if (!parsed.success) throw invalidBody(parsed.error.issues)
    c.set('body', parsed.data)
    await next()
  }
}

/**
 * The error for a body that breaks its schema: 413 `payload_too_large` when it breaks a size limit the schema names
 * (a trajectory's turns or characters: `details.limit`), else 400 `invalid_request` listing every field at fault.
 * `where` prefixes each path (`responses.3`) for bodies built from parts of the request.
 * @example if (!parsed.success) throw invalidBody(parsed.error.issues)
 */
export function invalidBody(issues: readonly z.core.$ZodIssue[], where?: string): AppError {
  const details = issues.map((issue) => {
    const path = issue.path.join('.') || '(body)'
    return { path: where ? `${where}: ${path}` : path, message: issue.message, ...limitOf(issue) }
  })
  const tooLarge = details.find((detail) => detail.limit !== undefined)
  if (tooLarge) {
    return new AppError('payload_too_large', `${tooLarge.path}: ${tooLarge.message}`, {
      details: { limit: tooLarge.limit, max: tooLarge.max, actual: tooLarge.actual, path: tooLarge.path },
    })
  }
  const summary = details
    .slice(0, 3)
    .map((d) => `${d.path}: ${d.message}`)
    .join('; ')
  return new AppError('invalid_request', `the request body does not match the expected shape — ${summary}`, {
    details,
  })
}
