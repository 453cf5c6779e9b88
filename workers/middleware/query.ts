import { validator } from 'hono/validator'
import { z } from 'zod'
import { AppError } from '../../src/errors/index.ts'

/** The longest sent value a refusal repeats. */
const MAX_ECHOED_CHARS = 200

/**
 * Validates a request's query parameters against a zod object schema, as `jsonBody` does a body, with Hono's
 * `validator('query')`; the handler reads the parsed values with `c.req.valid('query')`. A parameter sent twice counts
 * once, with its first value (as `c.req.query` reads it). A mismatch is a 400 `invalid_request` naming the parameter,
 * what it must be and what was sent.
 * @example app.get('/archive', validQuery(z.object({ limit: integerParam({ min: 1 }).default(50) })), handler)
 */
export function validQuery<T extends z.ZodObject>(schema: T) {
  return validator('query', (query) => {
    const firstValues = Object.fromEntries(
      Object.entries(query).map(([name, value]) => [name, Array.isArray(value) ? value[0] : value]),
    )
    const parsed = schema.safeParse(firstValues)
    if (parsed.success) return parsed.data as z.output<T>
    const issue = parsed.error.issues[0]!
    const name = String(issue.path[0] ?? '(query)')
    const sent = String(firstValues[name])
    // A value too long to read back (a pasted document as `q`) is not echoed: its schema's message says its length.
    const echo = sent.length <= MAX_ECHOED_CHARS ? ` (got "${sent}")` : ''
    throw new AppError('invalid_request', `${name} ${issue.message}${echo}`)
  })
}

/**
 * A query parameter that is an integer in `[min, max]`: digits only (`Number()` would read '', ' ' and '0x10' as
 * numbers). Optional with `.optional()`, defaulted with `.default(n)`.
 * @example z.object({ limit: integerParam({ min: 1, max: 200 }).default(50) })
 */
export function integerParam(range: { min: number; max?: number }) {
  const bounds = range.max === undefined ? `≥ ${range.min}` : `from ${range.min} to ${range.max}`
  const error = `must be an integer ${bounds}`
  const number = z.coerce.number<string>().int().min(range.min, { error })
  return z
    .string()
    .regex(/^\d{1,9}$/, { error })
    .pipe(range.max === undefined ? number : number.max(range.max, { error }))
}

/**
 * A query parameter that is a number of seconds ≥ 0: a decimal number, exponent allowed (Python may send 1e-05);
 * `Number()` alone would read '', ' ' and '0x10'. Infinity (`1e999`) is refused.
 * @example z.object({ timeout_s: secondsParam().default(30) })
 */
export function secondsParam() {
  const error = 'must be a number of seconds ≥ 0'
  return z
    .string()
    .regex(/^\+?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i, { error })
    .pipe(z.coerce.number<string>().finite({ error }).min(0, { error }))
}
