/**
 * `npx tsx bench/cold-start.ts [--rounds n]`: what does a cold start of the built Worker cost, next to the
 * bare Hono handler of `npm run bench` built the same way?
 *
 * In one run: builds both bundles (wrangler --dry-run, offline), then for each, `rounds` times in turn:
 *  - startup CPU: `wrangler check startup --worker <upload bundle>` profiles the isolate's startup phase (module
 *    evaluation: every top-level zod schema, drizzle table and Hono route built) in a local workerd; the
 *    figure is the profile's non-idle sampled time;
 *  - first answer: a fresh Miniflare (new workerd process) serving the bundle, wall time from `new Miniflare`
 *    to the answer of the README's first `POST /score` (workerd boot + isolate start + for the Worker a new
 *    Durable Object and a mock judgement; the bare handler answers its constant).
 * Prints medians and ratios to the bare handler, plus bundle sizes (raw and gzip; Workers allow 10 MiB gzip on
 * paid plans, 3 MiB on free, and 1 s of startup CPU).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { parseArgs } from 'node:util'
import { gzipSync } from 'node:zlib'
import { Miniflare, type WorkerOptions } from 'miniflare'
import { buildBundles, onInterrupt, ROOT, run, type Bundles } from './harness.ts'

interface Profile {
  nodes: { id: number; callFrame: { functionName: string } }[]
  samples: number[]
  timeDeltas: number[]
}

/** Non-idle sampled CPU time of a V8 CPU profile, in ms. */
function busyMs(profile: Profile): number {
  const idle = new Set(profile.nodes.filter((node) => node.callFrame.functionName === '(idle)').map((node) => node.id))
  let total = 0
  // timeDeltas[i] is the time before sample i; attribute it to the sample it ends on.
  profile.samples.forEach((sample, i) => {
    if (!idle.has(sample)) total += profile.timeDeltas[i] ?? 0
  })
  return total / 1_000
}

const WRANGLER_ENV = {
  ...process.env,
  WRANGLER_SEND_METRICS: 'false',
  CLOUDFLARE_CF_FETCH_ENABLED: 'false',
  NO_UPDATE_NOTIFIER: '1',
}

/** The upload form `wrangler check startup --worker` reads (what `wrangler deploy` would send). */
async function uploadBundle(config: string, outfile: string, compatibilityDate: string): Promise<string> {
  await run(
    'npx',
    [
      'wrangler',
      'deploy',
      '--dry-run',
      '--config',
      config,
      '--compatibility-date',
      compatibilityDate,
      '--outfile',
      outfile,
    ],
    { cwd: ROOT, env: WRANGLER_ENV },
  )
  return outfile
}

async function startupCpuMs(bundle: string, config: string, outDir: string): Promise<number> {
  const outfile = join(outDir, `startup-${Math.random().toString(36).slice(2)}.cpuprofile`)
  await run('npx', ['wrangler', 'check', 'startup', '--worker', bundle, '--config', config, '--outfile', outfile], {
    cwd: ROOT,
    env: WRANGLER_ENV,
  })
  return busyMs(JSON.parse(readFileSync(outfile, 'utf8')) as Profile)
}

async function firstAnswerMs(options: WorkerOptions, persistRoot: string): Promise<number> {
  const started = performance.now()
  const mf = new Miniflare({
    host: '127.0.0.1',
    port: 0,
    cf: false,
    defaultPersistRoot: persistRoot,
    ...options,
  } as ConstructorParameters<typeof Miniflare>[0])
  try {
    const response = await mf.dispatchFetch('http://127.0.0.1/score', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: README_SCORE_BODY,
    })
    await response.arrayBuffer()
    if (!response.ok) throw new Error(`/score answered ${response.status}`)
    return performance.now() - started
  } finally {
    await mf.dispose()
  }
}

/** The README's first curl example: the default run on the mock backend, no D1 read needed. */
const README_SCORE_BODY = JSON.stringify({
  rollout: { id: 'r1', input: 'What is 2+2?', output: '4', supplemental_context: '4' },
  metadata: { high_level_goal: 'math', model_size: '7B', current_step: 0, total_steps: 10 },
})

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

async function main() {
  const { values } = parseArgs({ options: { rounds: { type: 'string', default: '5' } } })
  const rounds = Number(values.rounds)
  const outDir = mkdtempSync(join(tmpdir(), 'rh-cold-'))
  const forget = onInterrupt(() => rmSync(outDir, { recursive: true, force: true }))
  try {
    const bundles: Bundles = await buildBundles(outDir)
    const common = {
      modules: true,
      compatibilityDate: bundles.compatibilityDate,
      compatibilityFlags: bundles.compatibilityFlags,
    }
    const targets = [
      {
        name: 'bare Hono handler',
        script: bundles.bareScript,
        upload: await uploadBundle(
          join(ROOT, 'bench/bare-worker.wrangler.toml'),
          join(outDir, 'bare.bundle'),
          bundles.compatibilityDate,
        ),
        config: join(ROOT, 'bench/bare-worker.wrangler.toml'),
        options: {
          ...common,
          scriptPath: bundles.bareScript,
          modulesRoot: dirname(bundles.bareScript),
        } as WorkerOptions,
      },
      {
        name: 'Reward Harness Worker',
        script: bundles.workerScript,
        upload: await uploadBundle(
          join(ROOT, 'wrangler.toml'),
          join(outDir, 'worker.bundle'),
          bundles.compatibilityDate,
        ),
        config: join(ROOT, 'wrangler.toml'),
        options: {
          ...bundles.workerOptions,
          ...common,
          scriptPath: bundles.workerScript,
          modulesRoot: dirname(bundles.workerScript),
          bindings: { ...bundles.workerOptions.bindings, DEPLOYMENT: 'local' },
        } as WorkerOptions,
      },
    ]
    const samples = targets.map(() => ({ cpu: [] as number[], first: [] as number[] }))
    for (let round = 0; round < rounds; round++) {
      for (const [i, target] of targets.entries()) {
        samples[i]!.cpu.push(await startupCpuMs(target.upload, target.config, outDir))
        samples[i]!.first.push(await firstAnswerMs(target.options, join(outDir, `persist-${round}-${i}`)))
      }
      process.stderr.write(`round ${round + 1}/${rounds} done\n`)
    }
    const rows = targets.map((target, i) => {
      const source = readFileSync(target.script)
      return {
        name: target.name,
        bytes: source.length,
        gzip: gzipSync(source).length,
        cpu: median(samples[i]!.cpu),
        first: median(samples[i]!.first),
      }
    })
    const [bare, app] = rows as [(typeof rows)[0], (typeof rows)[0]]
    console.log(`Cold start, ${rounds} rounds (medians), ${new Date().toISOString()}\n`)
    console.log('target                     bundle KiB   gzip KiB   startup CPU ms     first /score ms')
    for (const row of rows) {
      console.log(
        `${row.name.padEnd(26)} ${(row.bytes / 1024).toFixed(0).padStart(10)} ` +
          `${(row.gzip / 1024).toFixed(0).padStart(10)} ${(row.cpu < 1 ? '< 1' : row.cpu.toFixed(1)).padStart(16)} ` +
          `${row.first.toFixed(0).padStart(19)}`,
      )
    }
    const cpuRatio =
      bare.cpu < 1
        ? `> ×${app.cpu.toFixed(0)} (the bare handler's startup is under the profiler's 1 ms sampling)`
        : `×${(app.cpu / bare.cpu).toFixed(1)}`
    console.log(`\nratio to bare: first answer ×${(app.first / bare.first).toFixed(2)}, startup CPU ${cpuRatio}`)
    console.log(
      `limits: startup CPU ${app.cpu.toFixed(1)} ms of 1,000 ms allowed; gzip ${(app.gzip / 1024).toFixed(0)} KiB of ` +
        `3,072 KiB (free plan)`,
    )
    writeFileSync(
      join(ROOT, 'bench/results/cold-start.json'),
      JSON.stringify({ at: new Date().toISOString(), rounds, rows, samples }, null, 2),
    )
  } finally {
    forget()
    rmSync(outDir, { recursive: true, force: true })
  }
}

await main()
