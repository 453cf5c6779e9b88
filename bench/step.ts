/**
 * `npm run bench:step [-- --latency-ms 1000 --llm-concurrency 512 --clients 512 --prompts 512 --samples 16 --waiters
 * 1000]`
 *
 * One GRPO step at full size through the whole online path, with a judge that takes `--latency-ms` (1 s) for every
 * role and serves at most `--llm-concurrency` requests at once. The Worker is built behind bench/metered-worker.ts,
 * so every invocation (a request, a step job, a Durable Object call or alarm) counts its own subrequests. Scenarios,
 * each on a fresh Miniflare:
 *   - `global`: `rollouts_per_step` = prompts × samples (8,192), one rubric instance;
 *   - `per_instance`: the same rollouts, one instance per prompt (512 updates);
 *   - `sync`: `--waiters` sync-mode `/score` requests on one instance, released by the update.
 * For the first two, the step's rollouts are scored by `--clients` concurrent trainers; the step closes by count and
 * its update runs while the trainers go on scoring the next step. Printed: `/score` p50/p99 before the close and while
 * the update runs, the update's wall time, LLM calls of the update by role, analyses, instances updated, and per kind
 * of invocation the most subrequests in total, in flight, and holding one of the 6 connections.
 *
 * The local queue broker runs one consumer batch at a time where Cloudflare runs up to 250 consumer invocations
 * at once; the bench lets it hand over `--jobs-per-batch` (16) step jobs per batch and meters each job as the
 * invocation it is on Cloudflare (`max_batch_size = 1`).
 */
import { parseArgs } from 'node:util'
import {
  type buildMetered,
  createRun,
  percentile,
  startBench,
  stubRunConfig,
  withMeteredBuild,
  type BenchServer,
  type Bundles,
} from './harness.ts'
import { fixedLatencyStub, type LlmStubCounter } from './step-blocking.ts'

/** Cloudflare's per-invocation limits the counts are held to. */
const CONNECTION_LIMIT = 6
const SUBREQUEST_LIMIT = 1_000

function options() {
  const { values } = parseArgs({
    options: {
      'latency-ms': { type: 'string', default: '1000' },
      'llm-concurrency': { type: 'string', default: '512' },
      clients: { type: 'string', default: '512' },
      prompts: { type: 'string', default: '512' },
      samples: { type: 'string', default: '16' },
      waiters: { type: 'string', default: '1000' },
      'jobs-per-batch': { type: 'string', default: '16' },
      scenarios: { type: 'string', default: 'global,per_instance,sync' },
    },
  })
  return {
    latencyMs: Number(values['latency-ms']),
    llmConcurrency: Number(values['llm-concurrency']),
    clients: Number(values.clients),
    prompts: Number(values.prompts),
    samples: Number(values.samples),
    waiters: Number(values.waiters),
    jobsPerBatch: Number(values['jobs-per-batch']),
    scenarios: values.scenarios!.split(','),
  }
}
type Options = ReturnType<typeof options>

interface InvocationUsage {
  invocations: number
  maxSubrequests: number
  maxInFlight: number
  maxConnections: number
}
interface Meter {
  objects: Record<string, { requests: number }>
  invocations: Record<string, InvocationUsage>
}

/** A `/score` body: sample `sample` of prompt `prompt` at `step`, with outputs that differ in length and answer. */
function scoreBody(step: number, prompt: number, sample: number): string {
  const answer = (prompt * 7 + sample) % 13
  return JSON.stringify({
    rollout: {
      id: `s${step}-p${prompt}-k${sample}`,
      input:
        `Problem ${prompt}: a tank holds ${prompt + 20} litres and loses 3 litres an hour. How many litres are ` +
        `left after ${(prompt % 5) + 1} hours?`,
      output:
        `${'We subtract the loss for each hour and check the units. '.repeat(1 + (sample % 4))}The answer is ` +
        `${answer}.`,
      supplemental_context: String(prompt + 20 - 3 * ((prompt % 5) + 1)),
    },
    metadata: { high_level_goal: 'math word problems', model_size: '7B', current_step: step, total_steps: 100 },
  })
}

function runConfig(server: BenchServer, o: Options, extra: Record<string, unknown>): Record<string, unknown> {
  return {
    ...stubRunConfig(server.stubBaseUrl),
    agents: {
      default: {
        backend: 'openai',
        base_url: server.stubBaseUrl,
        model: 'stub',
        max_attempts: 2,
        timeout_ms: Math.max(30_000, o.latencyMs * 20),
      },
    },
    ...extra,
  }
}

async function getJson<T>(server: BenchServer, path: string, token: string): Promise<T> {
  const response = await fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${token}` } })
  if (!response.ok) throw new Error(`${path} answered ${response.status}: ${await response.text()}`)
  return (await response.json()) as T
}

/** `/score` answers of 503 the bench retried, over the whole run. */
let retried503 = 0

/** Scores `bodies` with `clients` in flight; each answer's end time and latency, in order of arrival. */
async function scoreAll(
  server: BenchServer,
  runId: string,
  token: string,
  bodies: Iterator<string>,
  clients: number,
  stop = () => false,
) {
  const answers: { endMs: number; ms: number }[] = []
  await Promise.all(
    Array.from({ length: clients }, async () => {
      for (let next = bodies.next(); !next.done && !stop(); next = bodies.next()) {
        const started = performance.now()
        // A 503 is retried after its Retry-After, as the clients do; the latency counts from the first attempt.
        for (let attempt = 1; ; attempt++) {
          const response = await fetch(`${server.url}/runs/${runId}/score`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
            body: next.value,
          })
          const text = await response.text()
          if (response.status === 200) break
          if (response.status !== 503 || attempt >= 4) throw new Error(`/score answered ${response.status}: ${text}`)
          retried503++
          await new Promise((resolve) => setTimeout(resolve, Number(response.headers.get('retry-after') ?? 1) * 1_000))
        }
        const endMs = performance.now()
        answers.push({ endMs, ms: endMs - started })
      }
    }),
  )
  return answers
}

function* stepBodies(step: number, o: Options, limit = Infinity): Generator<string> {
  let sent = 0
  for (let sample = 0; sample < o.samples; sample++) {
    for (let prompt = 0; prompt < o.prompts; prompt++) {
      if (sent++ >= limit) return
      yield scoreBody(step, prompt, sample)
    }
  }
}

const UPDATE_ROLES = ['analyzer', 'summarizer', 'meta_summarizer', 'query_generator', 'updater'] as const

function latencies(answers: readonly { ms: number }[]): string {
  const sorted = answers.map((answer) => answer.ms).sort((a, b) => a - b)
  return sorted.length
    ? `p50 ${percentile(sorted, 50).toFixed(0)} ms, p99 ${percentile(sorted, 99).toFixed(0)} ms (${sorted.length} ` +
        `answers)`
    : '(no answers)'
}

function printInvocations(meter: Meter): boolean {
  let within = true
  console.log(
    `  per invocation kind: count, most subrequests, most in flight, most holding connections (limits ` +
      `${SUBREQUEST_LIMIT} / – / ${CONNECTION_LIMIT})`,
  )
  const rows = Object.entries(meter.invocations).sort(([, a], [, b]) => b.maxSubrequests - a.maxSubrequests)
  for (const [kind, usage] of rows) {
    const over = usage.maxSubrequests > SUBREQUEST_LIMIT || usage.maxConnections > CONNECTION_LIMIT
    within &&= !over
    console.log(
      `    ${kind.padEnd(34)} ${String(usage.invocations).padStart(7)} ${String(usage.maxSubrequests).padStart(6)} ` +
        `${String(usage.maxInFlight).padStart(6)} ${String(usage.maxConnections).padStart(4)}${over ? '  OVER' : ''}`,
    )
  }
  return within
}

/** One step of prompts × samples rollouts, closed by count; its update runs while the trainers score the next step. */
async function stepScenario(
  bundles: Bundles,
  built: Awaited<ReturnType<typeof buildMetered>>,
  o: Options,
  mode: 'global' | 'per_instance',
) {
  const stub = fixedLatencyStub(o.latencyMs, o.llmConcurrency)
  const server = await startBench(bundles, {
    stub: 'node',
    storage: 'memory',
    workerScript: built.script,
    workerOptions: built.workerOptions,
    migrationsDir: built.migrationsDir,
    outbound: stub.handle,
    stepJobsPerBatch: o.jobsPerBatch,
  })
  try {
    const perStep = o.prompts * o.samples
    const runId = `step-${mode.replace('_', '-')}`
    const token = await createRun(
      server,
      runId,
      // A per_instance step touches one instance per prompt: its budget is raised to the step's prompts.
      runConfig(server, o, {
        rubrics_mode: mode,
        rollouts_per_step: perStep,
        budgets: { instances_per_step: Math.max(256, o.prompts) },
      }),
    )
    const started = performance.now()
    const before = await scoreAll(server, runId, token, stepBodies(0, o), o.clients)
    const closedAt = performance.now()
    const callsAtClose = stub.calls()
    // The trainers go on with the next step (short of closing it) while step 0 updates.
    let updatedAt: number | undefined
    const waited = (async () => {
      for (;;) {
        const answer = await getJson<{
          status: string
          step: number
          analyses: { analysed: number; failed: number; reasons: Record<string, number> }
          instances: { update: unknown }[]
        }>(server, `/runs/${runId}/rubric_status/wait?timeout_s=300`, token)
        if (answer.status === 'updated' && answer.step === 0) {
          updatedAt = performance.now()
          return answer
        }
      }
    })()
    const during = scoreAll(
      server,
      runId,
      token,
      stepBodies(1, o, perStep - 1),
      o.clients,
      () => updatedAt !== undefined,
    )
    const status = await waited
    const callsAtUpdate = stub.calls()
    const next = await during
    const meter = (await (await fetch(`${server.url}/__meter`)).json()) as Meter
    const whileUpdating = next.filter((answer) => answer.endMs <= updatedAt!)
    console.log(
      `\n${mode}: ${perStep} rollouts (${o.prompts} prompts × ${o.samples}), judge ${o.latencyMs} ms for every role, ` +
        `${o.llmConcurrency} at once; ${o.clients} trainers`,
    )
    console.log(
      `  step 0 scored in ${((closedAt - started) / 1_000).toFixed(1)} s; /score before the close: ` +
        `${latencies(before)}`,
    )
    console.log(`  /score while the update ran: ${latencies(whileUpdating)}`)
    console.log(`  update wall time (close → step updated): ${((updatedAt! - closedAt) / 1_000).toFixed(1)} s`)
    const byRole = UPDATE_ROLES.map((role) => `${role} ${callsAtUpdate[role] - callsAtClose[role]}`)
    const updateCalls = UPDATE_ROLES.reduce((sum, role) => sum + callsAtUpdate[role] - callsAtClose[role], 0)
    console.log(`  LLM calls of the update by role: ${byRole.join(', ')} (all: ${updateCalls})`)
    console.log(
      `  analyses: ${status.analyses.analysed} done, ${status.analyses.failed} failed; chosen for ` +
        `${JSON.stringify(status.analyses.reasons)}`,
    )
    console.log(
      `  instances updated: ${status.instances.filter((instance) => instance.update).length} of ` +
        `${status.instances.length}; the stub held at most ${stub.maxInFlight()} requests at once`,
    )
    const within = printInvocations(meter)
    return {
      mode,
      updateS: (updatedAt! - closedAt) / 1_000,
      updateCalls,
      analysed: status.analyses.analysed,
      instances: status.instances.length,
      within,
    }
  } finally {
    await server.dispose()
  }
}

/** `waiters` sync-mode requests on one instance: Durable Object requests per class, and per waiter. */
async function syncScenario(bundles: Bundles, built: Awaited<ReturnType<typeof buildMetered>>, o: Options) {
  const stub: LlmStubCounter = fixedLatencyStub(o.latencyMs, o.llmConcurrency)
  const server = await startBench(bundles, {
    stub: 'node',
    storage: 'memory',
    workerScript: built.script,
    workerOptions: built.workerOptions,
    migrationsDir: built.migrationsDir,
    outbound: stub.handle,
  })
  try {
    const token = await createRun(
      server,
      'step-sync',
      runConfig(server, o, { mode: 'sync', rollouts_per_step: o.waiters }),
    )
    const bodies = Array.from({ length: o.waiters }, (_, i) => scoreBody(0, i % o.prompts, Math.floor(i / o.prompts)))
    const started = performance.now()
    const answers = await scoreAll(server, 'step-sync', token, bodies.values(), o.waiters)
    const meter = (await (await fetch(`${server.url}/__meter`)).json()) as Meter
    const byClass: Record<string, number> = {}
    for (const [name, usage] of Object.entries(meter.objects))
      byClass[name.slice(0, name.indexOf(':'))] = (byClass[name.slice(0, name.indexOf(':'))] ?? 0) + usage.requests
    console.log(
      `\nsync: ${o.waiters} waiters on one instance, step closed by count at ${o.waiters}, judge ${o.latencyMs} ms`,
    )
    console.log(`  all answered in ${((performance.now() - started) / 1_000).toFixed(1)} s; ${latencies(answers)}`)
    console.log(
      `  Durable Object requests over the whole step, by class: ${Object.entries(byClass)
        .map(([name, n]) => `${name} ${n} (${(n / o.waiters).toFixed(2)} per waiter)`)
        .join(', ')}`,
    )
    console.log(
      `  scorer calls ${stub.calls().scorer} (${o.waiters} first judgements + the re-judgements on the new rubrics)`,
    )
    printInvocations(meter)
    return byClass
  } finally {
    await server.dispose()
  }
}

async function main(): Promise<void> {
  const o = options()
  await withMeteredBuild('rh-bench-step-', async (bundles, built) => {
    console.log(
      `npm run bench:step -- --latency-ms ${o.latencyMs} --llm-concurrency ${o.llmConcurrency} ` +
        `--clients ${o.clients} --prompts ${o.prompts} --samples ${o.samples} --waiters ${o.waiters} ` +
        `--jobs-per-batch ${o.jobsPerBatch}`,
    )
    const results: Awaited<ReturnType<typeof stepScenario>>[] = []
    for (const mode of ['global', 'per_instance'] as const)
      if (o.scenarios.includes(mode)) results.push(await stepScenario(bundles, built, o, mode))
    if (o.scenarios.includes('sync')) await syncScenario(bundles, built, o)
    console.log(`\n/score answers of 503 retried: ${retried503}`)
    const describe = (r: (typeof results)[number]) =>
      `${r.mode}: update ${r.updateS.toFixed(1)} s, ${r.updateCalls} LLM calls, ${r.analysed} analyses, ` +
      `${r.instances} instances, limits ${r.within ? 'kept' : 'EXCEEDED'}`
    console.log(results.map(describe).join('; '))
  })
}

await main()
