/**
 * `npx tsx bench/refusal.ts [--before 848d401] [--bodies 8] [--mib 16]`
 *
 * What 8 concurrent anonymous 16 MiB bodies cost the Worker that refuses them (issue 31 item 4), on this tree and on
 * the `--before` revision in the same run: each tree's Worker, wrapped by bench/refusal-worker.ts (a meter of the body
 * bytes it pulls), is served by Miniflare (one workerd process) on 127.0.0.1; a run is created (token-only), then
 * `--bodies` clients POST `--mib` MiB each to `/runs/<run>/score/batch` with no token at once. Printed per tree: the
 * bytes the Worker read, workerd's CPU seconds and its peak resident memory above the idle level over the burst, when
 * the 401s came (ms after the burst started), and how many bytes each client could send before its answer (what the
 * runtime took in beyond the Worker's hands).
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { artifactId, RmArtifactBody } from '../src/schemas/artifact.ts'
import { buildArtifact } from '../tests/e2e/support/artifact.ts'
import { buildBundles, cpuSecondsOf, onInterrupt, ROOT, run, startBench, workerdPids } from './harness.ts'

const { values } = parseArgs({
  options: {
    before: { type: 'string', default: '848d401' },
    bodies: { type: 'string', default: '8' },
    mib: { type: 'string', default: '16' },
    'redos-timeout-s': { type: 'string', default: '10' },
  },
})
const BODIES = Number(values.bodies)
const BODY_BYTES = Number(values.mib) * 1024 * 1024
const REDOS_TIMEOUT_MS = Number(values['redos-timeout-s']) * 1_000

/** The metered Worker of the tree at `root`, built into `outDir`. */
async function buildMeteredReads(root: string, outDir: string): Promise<string> {
  writeFileSync(join(root, 'bench/refusal-worker.bench-copy.ts'), readFileSync(join(ROOT, 'bench/refusal-worker.ts')))
  const env = { ...process.env, WRANGLER_SEND_METRICS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false' }
  await run('npx', ['wrangler', 'deploy', '--dry-run', '--outdir', outDir, 'bench/refusal-worker.bench-copy.ts'], {
    cwd: root,
    env,
  })
  rmSync(join(root, 'bench/refusal-worker.bench-copy.ts'))
  return join(outDir, 'refusal-worker.bench-copy.js')
}

/** The tree of `rev`, exported beside `tmp` with this checkout's node_modules. */
function treeOf(rev: string, tmp: string): string {
  const dir = join(tmp, 'before')
  mkdirSync(dir)
  execFileSync('bash', ['-c', `git archive ${rev} | tar -x -C ${dir}`], { cwd: ROOT })
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'))
  return dir
}

/** Resident memory of the given pids, in bytes. */
function residentBytes(pids: readonly number[]): number {
  let bytes = 0
  for (const pid of pids) {
    const kb = readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+) kB/m)?.[1]
    bytes += Number(kb ?? 0) * 1024
  }
  return bytes
}

/** One anonymous POST of `size` bytes: its status, when it came, and how much of the body went out before it. */
function postAnonymous(url: string, size: number, started: number) {
  return new Promise<{ status: number | 'reset'; ms: number; sentBeforeAnswer: number }>((resolve) => {
    const chunk = Buffer.alloc(64 * 1024, 0x20)
    let sent = 0
    let answered = false
    const req = httpRequest(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': size },
    })
    const sentAtAnswer = { bytes: 0 }
    req.on('response', (res) => {
      answered = true
      sentAtAnswer.bytes = sent
      res.resume()
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, ms: performance.now() - started, sentBeforeAnswer: sentAtAnswer.bytes }),
      )
    })
    // The runtime may close the connection on a body nobody reads before the client has read the answer.
    req.on('error', () => {
      if (!answered) resolve({ status: 'reset', ms: performance.now() - started, sentBeforeAnswer: sent })
    })
    const write = () => {
      while (!answered && sent < size) {
        const piece = chunk.subarray(0, Math.min(chunk.length, size - sent))
        sent += piece.length
        if (!req.write(piece)) return void req.once('drain', write)
      }
      req.end()
    }
    write()
  })
}

function countBy(keys: string[]): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const key of keys) counts[key] = (counts[key] ?? 0) + 1
  return counts
}

async function measureTree(label: string, workerScript: string, bundles: Awaited<ReturnType<typeof buildBundles>>) {
  const server = await startBench(bundles, { stub: 'node', storage: 'memory', workerScript })
  try {
    const created = await fetch(`${server.url}/runs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ config: { anchor_rubrics: [{ text: 'The final answer is correct.' }] } }),
    })
    const { run_id: runId } = (await created.json()) as { run_id: string }
    const pids = workerdPids()
    const idle = residentBytes(pids)
    let peak = idle
    const sampler = setInterval(() => (peak = Math.max(peak, residentBytes(pids))), 10)
    const cpuBefore = cpuSecondsOf(pids)
    const started = performance.now()
    const answers = await Promise.all(
      Array.from({ length: BODIES }, () =>
        postAnonymous(`${server.url}/runs/${runId}/score/batch`, BODY_BYTES, started),
      ),
    )
    const cpu = cpuSecondsOf(pids) - cpuBefore
    clearInterval(sampler)
    const { bytes_read: bytesRead } = (await (await fetch(`${server.url}/__read`)).json()) as { bytes_read: number }
    const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(1)
    const times = answers.map((answer) => answer.ms).sort((a, b) => a - b)
    const sent = answers.map((answer) => answer.sentBeforeAnswer)
    console.log(
      `${label}: answers ${JSON.stringify(countBy(answers.map((answer) => String(answer.status))))}; ` +
        `Worker read ${mib(bytesRead)} MiB of ${mib(BODIES * BODY_BYTES)} MiB; workerd CPU ${cpu.toFixed(2)} s; ` +
        `peak RSS +${mib(peak - idle)} MiB over idle ${mib(idle)} MiB; ` +
        `answers after ${times[0]!.toFixed(0)}–${times.at(-1)!.toFixed(0)} ms; ` +
        `client had sent ${mib(Math.min(...sent))}–${mib(Math.max(...sent))} MiB of each body by then`,
    )
    await measureRedos(label, server.url, server.adminToken)
  } finally {
    await server.dispose()
  }
}

/** The milliseconds `request` took to answer, or `timeout` when it had not answered within REDOS_TIMEOUT_MS. */
async function timed(request: (signal: AbortSignal) => Promise<Response>): Promise<string> {
  const started = performance.now()
  try {
    const response = await request(AbortSignal.timeout(REDOS_TIMEOUT_MS))
    await response.text()
    return `${response.status} after ${(performance.now() - started).toFixed(0)} ms`
  } catch {
    return `no answer within ${REDOS_TIMEOUT_MS / 1_000} s`
  }
}

async function measureRedos(label: string, url: string, adminToken: string) {
  const { artifact_id: _id, ...base } = await buildArtifact()
  const body = RmArtifactBody.parse({
    ...base,
    runtime: { ...base.runtime, extraction: { prompt: { kind: 'regex', pattern: '^(a+)+$' } } },
  })
  const headers = { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' }
  const artifact = { ...body, artifact_id: await artifactId(body) }
  await fetch(`${url}/admin/artifacts`, { method: 'POST', headers, body: JSON.stringify(artifact) })
  await fetch(`${url}/admin/targets/redos/deployments`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ artifact_id: artifact.artifact_id }),
  })
  const request = {
    prompt_id: 'p_math',
    prompt: `${'a'.repeat(10_000)}!`,
    candidate: { candidate_id: 'c1', text: 'The answer is 4.', source: 'verl', metadata: {} },
  }
  const score = timed((signal) =>
    fetch(`${url}/rm/redos/score`, { method: 'POST', headers, body: JSON.stringify(request), signal }),
  )
  await new Promise((resolve) => setTimeout(resolve, 50))
  const health = await timed((signal) => fetch(`${url}/healthz`, { signal }))
  console.log(`${label}: /rm score of ^(a+)+$ on 10,000 a + '!': ${await score}; /healthz sent 50 ms later: ${health}`)
}

const tmp = mkdtempSync(join(tmpdir(), 'rh-bench-refusal-'))
const forget = onInterrupt(() => rmSync(tmp, { recursive: true, force: true }))
try {
  mkdirSync(join(tmp, 'build'))
  const bundles = await buildBundles(join(tmp, 'build'))
  const before = await buildMeteredReads(treeOf(values.before, tmp), join(tmp, 'metered-before'))
  const after = await buildMeteredReads(ROOT, join(tmp, 'metered-after'))
  console.log(`${BODIES} concurrent anonymous ${values.mib} MiB bodies to /runs/<token-only run>/score/batch`)
  await measureTree(`before (${values.before})`, before, bundles)
  await measureTree('after (this tree)', after, bundles)
} finally {
  forget()
  rmSync(tmp, { recursive: true, force: true })
}
