/**
 * `npx tsx bench/token-budget.ts [--before <rev>] [--instances 600] [--rounds 120]`: LLM calls per rollout of one run
 * token's worst case (issue 39 item 3), on this tree and, with `--before`, on a git revision built beside it in the
 * same run.
 *
 * A `per_instance` run with the project's defaults (no `budgets` key, so a revision before them takes the same config)
 * is driven by one token the two ways that make its rollouts dearest, on the mock backend (every agent call counted in
 * `GET /llm_calls` like a real one):
 *   - `fresh instances`: `--instances` rollouts in one step, each under an `instance_id` of its own, then `/complete`:
 *     every instance costs a step update of its own (analyses, summary, queries, update);
 *   - `update per rollout`: `--rounds` times one rollout under a new `instance_id`, then `/complete` (and the wait for
 *     its update): every rollout starts an update.
 * Printed per tree and scenario: the rollouts sent and answered, the LLM calls by role, and calls per rollout sent.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import type { WorkerOptions } from 'miniflare'
import { unstable_getMiniflareWorkerOptions } from 'wrangler'
import {
  type BenchServer,
  buildBundles,
  type Bundles,
  createRun,
  onInterrupt,
  ROOT,
  run,
  startBench,
} from './harness.ts'

const METADATA = { high_level_goal: 'math', model_size: '7B', current_step: 0, total_steps: 10 }
/** Requests in flight at once while a scenario sends its rollouts. */
const CONCURRENCY = 16

type Scenario = 'fresh instances' | 'update per rollout'
type Result = { tree: string; scenario: Scenario; sent: number; answered: Record<number, number>; calls: CallCount }
type CallCount = Record<string, number>

async function main() {
  const { values } = parseArgs({
    options: {
      before: { type: 'string' },
      instances: { type: 'string', default: '600' },
      rounds: { type: 'string', default: '120' },
    },
  })
  const o = { instances: Number(values.instances), rounds: Number(values.rounds) }
  const tmp = mkdtempSync(join(tmpdir(), 'rh-token-budget-'))
  const forget = onInterrupt(() => rmSync(tmp, { recursive: true, force: true }))
  try {
    mkdirSync(join(tmp, 'build'))
    const bundles = await buildBundles(join(tmp, 'build'))
    const trees: { label: string; build: Awaited<ReturnType<typeof buildAt>> | undefined }[] = [
      { label: 'this tree', build: undefined },
    ]
    if (values.before)
      trees.unshift({ label: `@ ${values.before}`, build: await buildAt(extract(values.before, tmp), tmp) })
    const results: Result[] = []
    for (const tree of trees) {
      for (const scenario of ['fresh instances', 'update per rollout'] as const)
        results.push(await measure(bundles, tree.label, tree.build, scenario, o))
    }
    report(results, o)
  } finally {
    forget()
    rmSync(tmp, { recursive: true, force: true })
  }
}

/** The tree of `rev`, extracted (not checked out: no worktree is registered), sharing this checkout's node_modules. */
function extract(rev: string, tmp: string): string {
  const root = join(tmp, 'before')
  mkdirSync(root)
  execFileSync('sh', ['-c', `git -C "${ROOT}" archive "${rev}" | tar -x -C "${root}"`])
  symlinkSync(join(ROOT, 'node_modules'), join(root, 'node_modules'), 'dir')
  return root
}

/** The Worker of the tree at `root`, built as `wrangler deploy --dry-run` builds it, with its Miniflare options. */
async function buildAt(root: string, tmp: string) {
  const outDir = join(tmp, 'before-build')
  const env = { ...process.env, WRANGLER_SEND_METRICS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false' }
  await run('npx', ['wrangler', 'deploy', '--dry-run', '--outdir', outDir], { cwd: root, env })
  const { workerOptions } = unstable_getMiniflareWorkerOptions(join(root, 'wrangler.toml'))
  return { script: join(outDir, 'index.js'), workerOptions: workerOptions as WorkerOptions, root }
}

/** One scenario on a fresh server: what the token sent, what it was answered, and the LLM calls it cost. */
async function measure(
  bundles: Bundles,
  tree: string,
  build: Awaited<ReturnType<typeof buildAt>> | undefined,
  scenario: Scenario,
  o: { instances: number; rounds: number },
): Promise<Result> {
  const server = await startBench(bundles, {
    stub: 'worker',
    storage: 'memory',
    ...(build
      ? {
          workerScript: build.script,
          workerOptions: build.workerOptions,
          migrationsDir: join(build.root, 'migrations'),
        }
      : {}),
  })
  try {
    const token = await createRun(server, 'budget', {
      rubrics_mode: 'per_instance',
      anchor_rubrics: [{ text: 'The final answer is correct.' }],
    })
    const answered: Record<number, number> = {}
    const count = (status: number) => void (answered[status] = (answered[status] ?? 0) + 1)
    if (scenario === 'fresh instances') {
      let next = 0
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < o.instances) count(await score(server, token, next++))
        }),
      )
      await completeAndWait(server, token)
    } else {
      for (let round = 0; round < o.rounds; round++) {
        count(await score(server, token, round))
        await completeAndWait(server, token)
      }
    }
    // The isolates hand their scorer calls to the run's coordinator within a second or two.
    await new Promise((resolve) => setTimeout(resolve, 3_000))
    const sent = scenario === 'fresh instances' ? o.instances : o.rounds
    return { tree, scenario, sent, answered, calls: await llmCalls(server, token) }
  } finally {
    await server.dispose()
  }
}

/** `POST /score` of rollout `i` under an instance id of its own; answers its status. */
async function score(server: BenchServer, token: string, i: number): Promise<number> {
  const response = await post(server, token, '/score', {
    rollout: { id: `r-${i}`, input: `What is ${i} + ${i}?`, output: `${2 * i}`, supplemental_context: `${2 * i}` },
    metadata: METADATA,
    instance_id: `prompt-${i}`,
  })
  await response.body?.cancel()
  return response.status
}

/** `/complete`, then, when it closed the step, the wait for its update (a refused one leaves the step collecting). */
async function completeAndWait(server: BenchServer, token: string): Promise<void> {
  const completed = await post(server, token, '/complete', {})
  await completed.body?.cancel()
  if (!completed.ok) return
  for (;;) {
    const waited = await fetch(`${server.url}/rubric_status/wait?timeout_s=300`, {
      headers: { authorization: `Bearer ${token}` },
    })
    const body = (await waited.json()) as { status?: string }
    if (waited.status === 200 && body.status === 'updated') return
  }
}

function post(server: BenchServer, token: string, path: string, body: unknown): Promise<Response> {
  return fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  })
}

async function llmCalls(server: BenchServer, token: string): Promise<CallCount> {
  const response = await fetch(`${server.url}/llm_calls`, { headers: { authorization: `Bearer ${token}` } })
  const { calls } = (await response.json()) as { calls: { role: string; calls: number }[] }
  const byRole: CallCount = {}
  for (const group of calls) byRole[group.role] = (byRole[group.role] ?? 0) + group.calls
  return byRole
}

function report(results: readonly Result[], o: { instances: number; rounds: number }): void {
  console.log(
    `\nLLM calls of one run token's worst case: per_instance run with default config, mock backend; ` +
      `fresh instances: ${o.instances} rollouts under ${o.instances} instance ids in one step + /complete; ` +
      `update per rollout: ${o.rounds} × (1 rollout under a new id + /complete), ${new Date().toISOString()}\n`,
  )
  console.log(
    `${'tree'.padEnd(16)}${'scenario'.padEnd(22)}${'sent'.padStart(6)}  answered${' '.repeat(12)}calls` +
      `  per rollout  by role`,
  )
  for (const r of results) {
    const total = Object.values(r.calls).reduce((sum, calls) => sum + calls, 0)
    const answered = Object.entries(r.answered)
      .map(([status, n]) => `${n}×${status}`)
      .join(' ')
    console.log(
      `${r.tree.padEnd(16)}${r.scenario.padEnd(22)}${String(r.sent).padStart(6)}  ${answered.padEnd(20)}` +
        `${String(total).padStart(5)}  ${(total / r.sent).toFixed(2).padStart(11)}  ${JSON.stringify(r.calls)}`,
    )
  }
}

await main()
