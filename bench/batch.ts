/**
 * `npm run bench:batch [-- --items 1024 --baseline-items 256 --latency-ms 1000 --service-holds-connection true]`
 *
 * One OpenRLHF ≤ 0.9 request — the whole rollout batch, `--items` samples of 4 KB — against the Worker built behind
 * bench/metered-worker.ts with every invocation held to Cloudflare's 6 open connections (extra subrequests wait, as
 * there) and each service-binding call counted as holding one of its caller's connections (the worst case, the
 * default: the docs do not say it is exempt; `--service-holds-connection false` for the other reading). The judge
 * answers after `--latency-ms`. Same run, fresh Miniflare each:
 *   - `one invocation`: the Worker without its JUDGE binding, so the request judges everything itself;
 *   - `handed out`: JUDGE bound, so the request hands its judgements out in chunks, each an invocation of its own.
 * Printed per scenario: wall time, judge calls, the most judge calls in flight, and per invocation kind the most
 * subrequests and connections; then the ratio of the two at `--baseline-items` (a full baseline of 1,024 would take
 * about 1,024 ÷ 6 latencies).
 */
import { parseArgs } from 'node:util'
import { type buildMetered, createRun, startBench, stubRunConfig, withMeteredBuild, type Bundles } from './harness.ts'
import { fixedLatencyStub } from './step-blocking.ts'

const CONNECTION_LIMIT = 6
/** OpenRLHF's request timeout. */
const TRAINER_TIMEOUT_S = 180

function options() {
  const { values } = parseArgs({
    options: {
      items: { type: 'string', default: '1024' },
      'baseline-items': { type: 'string', default: '256' },
      'latency-ms': { type: 'string', default: '1000' },
      'sample-bytes': { type: 'string', default: '4096' },
      'service-holds-connection': { type: 'string', default: 'true' },
    },
  })
  return {
    items: Number(values.items),
    baselineItems: Number(values['baseline-items']),
    latencyMs: Number(values['latency-ms']),
    sampleBytes: Number(values['sample-bytes']),
    serviceHoldsConnection: values['service-holds-connection'] !== 'false',
  }
}
type Options = ReturnType<typeof options>

/** The body OpenRLHF ≤ 0.9 sends for `items` samples of about `bytes` each. */
function openRlhfBody(items: number, bytes: number, salt: string): string {
  const prompts = Array.from(
    { length: items },
    (_, i) =>
      `<|user|>(${salt}) A tank holds ${i + 20} litres and loses 3 an hour. How much is left after 2 ` +
      `hours?<|assistant|>`,
  )
  const responses = prompts.map(
    (_, i) =>
      `${`${'We subtract the loss for each hour and check the units. '.repeat(Math.ceil(bytes / 56))}`.slice(
        0,
        bytes - 20,
      )} The answer is ${i + 14}.`,
  )
  return JSON.stringify({
    query: prompts.map((prompt, i) => prompt + responses[i]),
    prompts,
    labels: prompts.map((_, i) => String(i + 14)),
  })
}

interface Meter {
  invocations: Record<
    string,
    { invocations: number; maxSubrequests: number; maxInFlight: number; maxConnections: number }
  >
}

async function scenario(
  bundles: Bundles,
  built: Awaited<ReturnType<typeof buildMetered>>,
  o: Options,
  items: number,
  handedOut: boolean,
) {
  const stub = fixedLatencyStub(o.latencyMs)
  const server = await startBench(bundles, {
    stub: 'node',
    storage: 'memory',
    workerScript: built.script,
    workerOptions: built.workerOptions,
    migrationsDir: built.migrationsDir,
    outbound: stub.handle,
    vars: {
      BENCH_CONNECTION_LIMIT: String(CONNECTION_LIMIT),
      BENCH_SERVICE_HOLDS_CONNECTION: String(o.serviceHoldsConnection),
    },
    withoutSelfBindings: !handedOut,
  })
  try {
    const config = {
      ...stubRunConfig(server.stubBaseUrl),
      agents: {
        default: { backend: 'mock' },
        scorer: { backend: 'openai', base_url: server.stubBaseUrl, model: 'stub', max_attempts: 2, timeout_ms: 60_000 },
      },
    }
    const token = await createRun(server, 'batch', config)
    const body = openRlhfBody(items, o.sampleBytes, `${items}-${handedOut}`)
    const started = performance.now()
    const response = await fetch(`${server.url}/runs/batch/compat/openrlhf`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body,
    })
    const answer = (await response.json()) as { rewards?: number[] }
    const seconds = (performance.now() - started) / 1_000
    if (response.status !== 200 || answer.rewards?.length !== items)
      throw new Error(`the batch answered ${response.status}: ${JSON.stringify(answer).slice(0, 300)}`)
    const meter = (await (await fetch(`${server.url}/__meter`)).json()) as Meter
    const name = handedOut ? 'handed out' : 'one invocation'
    console.log(
      `\n${name}: ${items} samples (${(body.length / 1_048_576).toFixed(1)} MiB) answered in ` +
        `${seconds.toFixed(1)} s; ` +
        `judge calls ${stub.calls().scorer}, at most ${stub.maxInFlight()} in flight`,
    )
    for (const [kind, usage] of Object.entries(meter.invocations).filter(
      ([kind]) => kind.includes('openrlhf') || kind.startsWith('JUDGE'),
    )) {
      console.log(
        `  ${kind}: ${usage.invocations} invocation(s), most subrequests ${usage.maxSubrequests}, most connections ` +
          `${usage.maxConnections} (limit ${CONNECTION_LIMIT})`,
      )
    }
    return seconds
  } finally {
    await server.dispose()
  }
}

async function main(): Promise<void> {
  const o = options()
  await withMeteredBuild('rh-bench-batch-', async (bundles, built) => {
    console.log(
      `npm run bench:batch -- --items ${o.items} --baseline-items ${o.baselineItems} --latency-ms ${o.latencyMs} ` +
        `--sample-bytes ${o.sampleBytes} --service-holds-connection ${o.serviceHoldsConnection}`,
    )
    const baseline = await scenario(bundles, built, o, o.baselineItems, false)
    const small = await scenario(bundles, built, o, o.baselineItems, true)
    const full = o.items === o.baselineItems ? small : await scenario(bundles, built, o, o.items, true)
    console.log(
      `\n${o.baselineItems} samples: one invocation ${baseline.toFixed(1)} s, handed out ${small.toFixed(1)} s: ` +
        `${(baseline / small).toFixed(1)}× faster`,
    )
    console.log(
      `${o.items} samples handed out: ${full.toFixed(1)} s (OpenRLHF waits ${TRAINER_TIMEOUT_S} s; one invocation ` +
        `would need about ${(((o.items / CONNECTION_LIMIT) * o.latencyMs) / 1_000).toFixed(0)} s)`,
    )
  })
}

await main()
