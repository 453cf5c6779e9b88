/**
 * How long a shard collects rollouts before it reports its tally to the run's coordinator (`LEDGER_REPORT_MS`
 * overrides).
 */
const REPORT_INTERVAL_MS = 1_000

/** How many report intervals a shard of a counted run waits between reports. */
const COUNTED_REPORT_SLOWER = 10

/**
 * The time between a shard's reports: `LEDGER_REPORT_MS` when set, else 1 s; a counted run's shards report 10× less
 * often (its coordinator hears of their seats at every ask for more).
 * @example reportIntervalMs(env, { counted: false }) // 1000
 */
export function reportIntervalMs(env: { LEDGER_REPORT_MS?: string }, { counted }: { counted: boolean }): number {
  const configured = Number(env.LEDGER_REPORT_MS)
  const interval = Number.isFinite(configured) && configured > 0 ? configured : REPORT_INTERVAL_MS
  return counted ? interval * COUNTED_REPORT_SLOWER : interval
}
