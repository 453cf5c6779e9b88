/**
 * `npx tsx bench/state-growth.ts [-- --per-step 400 --steps 8 --output-chars 3000 --archive]`
 *
 * How the local state grows with the rollouts a run scores: the Worker served from Miniflare with its SQLite files
 * on disk (as `npm start` keeps them under .wrangler/state), a run with the default config but `rollouts_per_step`,
 * `--steps` steps of fresh rollouts with outputs of `--output-chars`, and after each step's update the bytes of every
 * file under the state directory, measured with workerd stopped and each SQLite write-ahead log folded into its
 * database (a checkpoint, as SQLite makes on a clean close: a running workerd keeps each log at up to about 4 MB,
 * reused, which would read as growth for the first dozen steps). Prints the bytes added per rollout over the last
 * half of the steps, when the ledger's retention has reached its steady state.
 */
import Database from 'better-sqlite3'
import { readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import {
  applyMigrations,
  buildBundles,
  createRun,
  nextScoreBody,
  onInterrupt,
  startBench,
  storageRoot,
  stubRunConfig,
  type BenchServer,
  waitForStatus,
} from './harness.ts'

function bytesUnder(dir: string): number {
  let total = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    total += entry.isDirectory() ? bytesUnder(path) : statSync(path).size
  }
  return total
}

/** Folds every SQLite write-ahead log under `dir` into its database, as a clean close would. */
function checkpoint(dir: string): void {
  for (const [path] of filesUnder(dir)) {
    if (!path.endsWith('.sqlite')) continue
    const db = new Database(path)
    db.pragma('wal_checkpoint(TRUNCATE)')
    db.close()
  }
}

function filesUnder(dir: string): [string, number][] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry): [string, number][] => {
    const path = join(dir, entry.name)
    return entry.isDirectory() ? filesUnder(path) : [[path, statSync(path).size]]
  })
}

const waitUpdated = (server: BenchServer, runId: string, token: string, step: number) =>
  waitForStatus(
    server,
    runId,
    token,
    (status) => status.step > step || (status.step === step && status.status === 'updated'),
    `step ${step} to be updated`,
  )

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'per-step': { type: 'string', default: '400' },
      steps: { type: 'string', default: '8' },
      'output-chars': { type: 'string', default: '3000' },
      archive: { type: 'boolean', default: false },
    },
  })
  const perStep = Number(values['per-step'])
  const steps = Number(values.steps)
  const outputChars = Number(values['output-chars'])
  const build = mkdtempSync(join(tmpdir(), 'rh-bench-growth-'))
  const state = storageRoot('disk')
  const cleanup = () => {
    rmSync(build, { recursive: true, force: true })
    rmSync(state, { recursive: true, force: true })
  }
  const forget = onInterrupt(cleanup)
  const bundles = await buildBundles(build)
  let server = await startBench(bundles, { stub: 'node', storage: 'disk', persistRoot: state })
  try {
    await applyMigrations(server.mf)
    // The default run's rubrics and agents (mock judge: no LLM needed), closing a step every `perStep` rollouts.
    const { agents: _stubAgents, ...defaults } = stubRunConfig()
    const runId = 'growth'
    const token = await createRun(server, runId, {
      ...defaults,
      rollouts_per_step: perStep,
      ...(values.archive ? { archive: true } : {}),
    })
    await server.dispose()
    checkpoint(state)
    const sizes: number[] = [bytesUnder(state)]
    let files = new Map(filesUnder(state))
    for (let step = 0; step < steps; step++) {
      server = await startBench(bundles, { stub: 'node', storage: 'disk', persistRoot: state })
      for (let sent = 0; sent < perStep; sent += 16) {
        await Promise.all(
          Array.from({ length: Math.min(16, perStep - sent) }, async () => {
            const body = JSON.stringify({
              ...JSON.parse(nextScoreBody('growth', outputChars)),
              metadata: { high_level_goal: 'math', model_size: '7B', current_step: step, total_steps: steps },
            })
            const response = await fetch(`${server.url}/runs/${runId}/score`, {
              method: 'POST',
              headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
              body,
            })
            if (!response.ok) throw new Error(`/score answered ${response.status}: ${await response.text()}`)
            await response.body?.cancel()
          }),
        )
      }
      await waitUpdated(server, runId, token, step)
      // Let the shards' retention alarms run, then stop workerd so the logs are folded in.
      await new Promise((resolve) => setTimeout(resolve, 2_000))
      await server.dispose()
      checkpoint(state)
      sizes.push(bytesUnder(state))
      console.log(
        `after step ${step}: ${sizes.at(-1)!.toLocaleString('en')} bytes ` +
          `(+${(sizes.at(-1)! - sizes.at(-2)!).toLocaleString('en')})`,
      )
      if (process.env.GROWTH_FILES) {
        const now = new Map(filesUnder(state))
        for (const [file, size] of now)
          if (size !== (files.get(file) ?? 0))
            console.log(`  ${(size - (files.get(file) ?? 0)).toString().padStart(10)} ${file.slice(state.length)}`)
        files = now
      }
    }
    const half = Math.floor(steps / 2)
    const perRollout = (sizes.at(-1)! - sizes[steps - half]!) / (half * perStep)
    console.log(
      `npx tsx bench/state-growth.ts -- --per-step ${perStep} --steps ${steps} --output-chars ` +
        `${outputChars}${values.archive ? ' --archive' : ''}`,
    )
    console.log(`state bytes added per rollout over the last ${half} steps: ${perRollout.toFixed(0)}`)
  } finally {
    await server.dispose().catch(() => undefined)
    forget()
    cleanup()
  }
}

await main()
