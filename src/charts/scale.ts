import { tickStep } from 'd3-array'

/** A linear map from a data domain onto a pixel range. */
export interface LinearScale {
  (value: number): number
  domain: [number, number]
}

/**
 * A linear scale; a zero-width domain maps everything to the middle of the range.
 * @example linearScale([0, 10], [0, 100])(5) // 50
 */
export function linearScale(domain: [number, number], range: [number, number]): LinearScale {
  const [d0, d1] = domain
  const [r0, r1] = range
  const span = d1 - d0
  const scale = ((value: number) =>
    span === 0 ? (r0 + r1) / 2 : r0 + ((value - d0) / span) * (r1 - r0)) as LinearScale
  scale.domain = domain
  return scale
}

/**
 * "Nice" tick step (1, 2 or 5 times a power of ten) giving about `count` ticks over `span` (d3's `tickStep`).
 * @example niceStep(1, 5) // 0.2
 */
function niceStep(span: number, count: number): number {
  if (!(span > 0) || !Number.isFinite(span)) return 1
  const step = tickStep(0, span, Math.max(1, count))
  return step > 0 && Number.isFinite(step) ? step : 1
}

/**
 * Widens `[min, max]` outwards to whole tick steps and lists the ticks. A degenerate domain is
 * padded first so a single value still gets an axis. With `integers`, steps are at least 1.
 * @example niceDomain(0.13, 0.87) // { domain: [0, 1], ticks: [0, 0.2, 0.4, 0.6, 0.8, 1], step: 0.2 }
 */
export function niceDomain(
  min: number,
  max: number,
  options: { count?: number; integers?: boolean; exact?: boolean } = {},
): { domain: [number, number]; ticks: number[]; step: number } {
  const count = options.count ?? 5
  let lo = min
  let hi = max
  if (isDegenerate(lo, hi)) {
    lo = (lo + hi) / 2
    hi = lo
    const pad = options.integers ? 1 : Math.abs(lo) > 1e-100 ? Math.abs(lo) * 0.1 : 0.5
    // A lone whole number at or above 0 (step 0, iteration 0) grows upwards only: no meaningless "-1" tick.
    if (!(options.integers && lo >= 0)) lo -= pad
    hi += pad
  }
  let step = niceStep(hi - lo, count)
  if (options.integers) step = Math.max(1, Math.round(step))
  // `exact` keeps a caller-given domain (e.g. [0, 1] for accuracies) and only places ticks inside it.
  const start = options.exact ? lo : Math.floor(lo / step + 1e-9) * step
  const end = options.exact ? hi : Math.ceil(hi / step - 1e-9) * step
  const ticks: number[] = []
  for (let tick = Math.ceil(start / step - 1e-9) * step; tick <= end + step * 1e-9; tick += step) {
    ticks.push(roundTo(tick, step))
    if (ticks.length > 50) break
  }
  return { domain: [start, end], ticks, step }
}

/** Rounds away the float noise of repeated `+= step` (0.30000000000000004 → 0.3). */
function roundTo(value: number, step: number): number {
  const decimals = decimalsFor(step)
  return Number(value.toFixed(decimals))
}

/**
 * How many decimals a tick label needs when ticks are `step` apart.
 * @example decimalsFor(0.25) // 2
 */
function decimalsFor(step: number): number {
  if (!(step > 0) || !Number.isFinite(step)) return 0
  for (let decimals = 0; decimals < 10; decimals++) {
    if (Math.abs(Math.round(step * 10 ** decimals) - step * 10 ** decimals) < 1e-6) return decimals
  }
  return 10
}

/**
 * Formats a tick value with the decimals its step needs.
 * @example formatTick(0.4, 0.2) // '0.4'
 */
export function formatTick(value: number, step: number): string {
  const text = value.toFixed(decimalsFor(step))
  return text === '-0' ? '0' : text
}

/**
 * A short human form of a value: up to 3 significant digits, no exponent for everyday numbers.
 * @example formatValue(0.81234) // '0.812'
 */
export function formatValue(value: number): string {
  if (!Number.isFinite(value)) return String(value)
  if (value !== 0 && (Math.abs(value) >= 1e6 || Math.abs(value) < 1e-3)) return value.toExponential(2)
  if (Number.isInteger(value)) return String(value)
  return String(Number(value.toPrecision(3)))
}

/**
 * A caller's domain when it is two finite numbers low-to-high, else undefined (fall back to the data).
 * @example validDomain([1, 0]) // undefined
 */
export function validDomain(domain: [number, number] | undefined): [number, number] | undefined {
  if (!domain) return undefined
  const [low, high] = domain
  return Number.isFinite(low) && Number.isFinite(high) && low < high ? [low, high] : undefined
}

/**
 * True when `[low, high]` is too narrow to divide: one value, float noise, or a denormal span
 * (any of which would give a zero tick step or bin width).
 * @example isDegenerate(0, 5e-324) // true
 */
export function isDegenerate(low: number, high: number): boolean {
  return high - low <= Math.max(Math.abs(low), Math.abs(high)) * 1e-9 || high - low < 1e-200
}
