/**
 * Vitest global setup of the Worker tests: one line, before workerd's own log lines, on what they are. workerd prints
 * every uncaught exception with a stack of addresses, including the failures these tests cause on purpose: Durable
 * Objects reset mid-step (faults.test.ts), judges that refuse the connection or drop it (artifacts.test.ts), the test
 * runner's closing WebSocket. The pool writes them from where a setup file cannot filter them, so they are named.
 */

/**
 * Says what workerd's log lines in this run are.
 * @example export default defineConfig({ test: { globalSetup: ['./tests/workers/workerd-logs.ts'] } })
 */
export default function setup(): void {
  process.stderr.write(
    'workers tests: the "uncaught exception … stack: …workerd@…" lines below are workerd logging failures the tests ' +
      'cause on purpose (Durable Object resets, unreachable judges); a test that fails says FAIL\n',
  )
}
