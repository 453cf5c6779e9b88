import { AppError } from '../../src/errors/index.ts'

/**
 * An integer query parameter in `[min, max]`: digits only (`Number()` would read '', ' ' and '0x10' as numbers);
 * `fallback` when the parameter is absent; anything else is a 400 `invalid_request` naming the parameter.
 * @example const limit = integerQuery(c.req.query('limit'), 'limit', { fallback: 50, min: 1, max: 200 })
 */
export function integerQuery<F extends number | undefined>(
  raw: string | undefined,
  name: string,
  range: { fallback: F; min: number; max?: number },
): number | F {
  if (raw === undefined) return range.fallback
  const value = /^\d{1,9}$/.test(raw) ? Number(raw) : NaN
  if (Number.isInteger(value) && value >= range.min && (range.max === undefined || value <= range.max)) return value
  const bounds = range.max === undefined ? `≥ ${range.min}` : `from ${range.min} to ${range.max}`
  throw new AppError('invalid_request', `${name} must be an integer ${bounds} (got "${raw}")`)
}
