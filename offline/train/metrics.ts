/**
 * A training run's metrics from a JSON file a trainer wrote (numbers, nested objects flattened with ".") and from
 * `--metric name=value` flags. Anything else is refused by name rather than dropped: a metric that silently vanishes
 * from lineage is worse than a finalize that asks for a fix.
 */
import { readFileSync } from 'node:fs'
import { locateJsonError } from '../../src/datasets/json-text.ts'
import { UsageError } from '../../src/usage-error/index.ts'

/** Named finite numbers. */
export type MetricValues = Record<string, number>

/**
 * Reads a metrics file; undefined when it does not exist and `optional` (a trainer that failed may not write one).
 * @example readMetricsFile('out/metrics.json') // { reward_mean: 0.62, 'eval.accuracy': 0.8 }
 */
export function readMetricsFile(file: string, optional = false): MetricValues | undefined {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (error) {
    if (optional && (error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw new UsageError(`--metrics: cannot read ${file}: ${(error as Error).message}`)
  }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    const fault = locateJsonError(text)
    throw new UsageError(
      `--metrics ${file}: line ${fault.line}: not valid JSON: ${fault.reason} at column ${fault.column}`,
    )
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new UsageError(`--metrics ${file}: expected a JSON object of metrics, e.g. {"reward_mean": 0.6}`)
  return flattenMetrics(value as Record<string, unknown>, `--metrics ${file}`)
}

/**
 * Flattens nested objects into dotted names; every leaf must be a finite number.
 * @example flattenMetrics({ reward: { mean: 0.6 }, steps: 10 }, 'm.json') // { 'reward.mean': 0.6, steps: 10 }
 */
function flattenMetrics(object: Record<string, unknown>, place: string, prefix = ''): MetricValues {
  const metrics: MetricValues = {}
  for (const [key, value] of Object.entries(object)) {
    const name = `${prefix}${key}`
    if (!key.trim())
      throw new UsageError(`${place}: a metric name is empty${prefix ? ` under "${prefix.slice(0, -1)}"` : ''}`)
    if (typeof value === 'object' && value !== null && !Array.isArray(value))
      Object.assign(metrics, flattenMetrics(value as Record<string, unknown>, place, `${name}.`))
    else if (typeof value === 'number' && Number.isFinite(value)) metrics[name] = value
    else throw new UsageError(`${place}: "${name}" is not a finite number (${describe(value)})`)
  }
  return metrics
}

/**
 * Parses one `--metric name=value`.
 * @example parseMetricFlag('reward_mean=0.62') // ['reward_mean', 0.62]
 */
export function parseMetricFlag(text: string): [string, number] {
  const at = text.indexOf('=')
  const name = text.slice(0, at).trim()
  const raw = text.slice(at + 1).trim()
  if (at === -1 || !name) throw new UsageError(`--metric "${text}": use name=value, e.g. reward_mean=0.62`)
  const value = Number(raw)
  if (raw === '' || !Number.isFinite(value))
    throw new UsageError(`--metric "${text}": "${name}" is not a finite number`)
  return [name, value]
}

function describe(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'a list'
  if (typeof value === 'number') return String(value)
  return `a ${typeof value}`
}
