/**
 * Descriptive statistics on `simple-statistics` and d3-array, with empty input made explicit: every function answers
 * `null` when the sample is too small for its statistic, and callers choose their own fallback (`mean(xs) ?? 0`).
 * Quantiles are linear between order statistics (R-7, what numpy and d3 use by default).
 */
import { quantile as quantileR7 } from 'd3-array'
import {
  mean as meanOf,
  sampleCorrelation,
  sampleRankCorrelation,
  sampleStandardDeviation,
  variance,
} from 'simple-statistics'

/**
 * The arithmetic mean; null for no values.
 * @example mean([0.5, 1]) // 0.75
 */
export function mean(values: readonly number[]): number | null {
  return values.length ? meanOf(values as number[]) : null
}

/**
 * The q-quantile (0 ≤ q ≤ 1), interpolated linearly between order statistics; null for no values.
 * @example quantile([4, 1, 3, 2], 0.5) // 2.5
 */
export function quantile(values: readonly number[], q: number): number | null {
  return values.length ? (quantileR7(values, q) ?? null) : null
}

/**
 * The median; null for no values.
 * @example median([3, 1, 2, 10]) // 2.5
 */
export function median(values: readonly number[]): number | null {
  return quantile(values, 0.5)
}

/**
 * The population variance (divides by n); null for no values.
 * @example populationVariance([1, 3]) // 1
 */
export function populationVariance(values: readonly number[]): number | null {
  return values.length ? variance(values as number[]) : null
}

/**
 * The population standard deviation (divides by n); null for no values.
 * @example populationStd([1, 3]) // 1
 */
export function populationStd(values: readonly number[]): number | null {
  const result = populationVariance(values)
  return result === null ? null : Math.sqrt(result)
}

/**
 * The sample standard deviation (divides by n − 1, as `torch.std`); null for fewer than two values.
 * @example sampleStd([1, 3]) // 1.4142…
 */
export function sampleStd(values: readonly number[]): number | null {
  return values.length >= 2 ? sampleStandardDeviation(values as number[]) : null
}

/**
 * Pearson's correlation of paired values; null for fewer than two pairs or when either side does not vary.
 * @example correlation([1, 2, 3], [2, 4, 7]) // 0.9934…
 */
export function correlation(xs: readonly number[], ys: readonly number[]): number | null {
  if (xs.length < 2 || xs.length !== ys.length || !sampleStd(xs) || !sampleStd(ys)) return null
  return sampleCorrelation(xs as number[], ys as number[])
}

/**
 * Spearman's rank correlation of paired values (ties share their mean rank); null like `correlation`.
 * @example rankCorrelation([1, 2, 3], [10, 30, 20]) // 0.5
 */
export function rankCorrelation(xs: readonly number[], ys: readonly number[]): number | null {
  if (correlation(xs, ys) === null) return null
  return sampleRankCorrelation(xs as number[], ys as number[])
}
