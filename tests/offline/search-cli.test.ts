/**
 * `reward-harness search` through the real CLI (child processes of the `reward-harness` bin, as a person runs it):
 * (a) output + run records, same seed → same rubrics, the replay script reproduces them; (b) an
 * interrupted run resumed ends exactly like an uninterrupted one, with no LLM question asked twice; (c) against
 * three OpenAI-compatible stubs on loopback (one failing ~30% with 429/500/hangs): completes, caps hold, every
 * call accounted, a repeat costs 0 calls; (d) broken datasets and flags → exit 2 naming the place.
 */
import Database from 'better-sqlite3'
import { execFile, spawn } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createServer, request as httpRequest, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { main } from '../../offline/cli/index.ts'
import { SearchConfig } from '../../src/search/config.ts'
import { listCheckpoints } from '../../offline/search/checkpoints.ts'
import { CONFIG_KNOBS, flagOf } from '../../offline/search/options.ts'
import { normaliseArgv } from '../../offline/search/records.ts'
import { startLlmStub, type LlmStub, type StubFault } from '../support/llm-stub.ts'
import { roleOf, searchResponder } from '../support/search-stub.ts'

const ROOT = join(import.meta.dirname, '../..')
const BIN = join(ROOT, 'reward-harness')
const DEMO = join(ROOT, 'examples/demo.json')

interface Run {
  code: number
  out: string
  err: string
}

/** Runs `reward-harness <args>` in a child process. */
function cli(args: string[], options: { cwd?: string; env?: Record<string, string> } = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { cwd: options.cwd ?? ROOT, env: { ...process.env, NO_COLOR: '1', ...options.env }, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, out: stdout, err: stderr })
      },
    )
  })
}

const readJson = (file: string) => JSON.parse(readFileSync(file, 'utf8'))
/** What must be identical between runs: everything but run_manifest and usage. */
const results = (output: { best_rubrics: unknown; best_objective_scores: unknown; search_diagnostics: unknown }) => ({
  best_rubrics: output.best_rubrics,
  best_objective_scores: output.best_objective_scores,
  search_diagnostics: output.search_diagnostics,
})
/** The stored replies of a cache root, one per key. */
function cacheLines(root: string): Array<{ key: string }> {
  return readdirSync(root).flatMap((dir) => {
    const db = new Database(join(root, dir, 'llm-cache.sqlite'), { readonly: true })
    try {
      return db.prepare('SELECT key FROM replies').all() as Array<{ key: string }>
    } finally {
      db.close()
    }
  })
}

let work: string
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'search-cli-'))
})
afterAll(() => rmSync(work, { recursive: true, force: true }))

describe('search options (in process)', () => {
  it('has a flag for every SearchConfig knob, listed in --help, and normalises path flags', async () => {
    const keys = Object.keys(SearchConfig.shape).sort()
    expect(CONFIG_KNOBS.map((knob) => knob.key).sort()).toEqual(keys)
    const help = await cli(['search', '--help'])
    expect(help.code).toBe(0)
    for (const key of keys) expect(help.out, key).toContain(flagOf(key))
    // `help search` shows the same help (the knob flags load whenever a command line names search).
    expect((await cli(['help', 'search'])).out).toBe(help.out)
    for (const flag of [
      '--dataset',
      '--output',
      '--config',
      '--resume',
      '--backend',
      '--endpoint',
      '--endpoints-file',
      '--base-url',
      '--api-key-env',
      '--model-initializer',
      '--model-proposer',
      '--model-verifier',
      '--model-judge',
      '--temperature',
      '--locale',
      '--extraction',
      '--preset-rubrics',
      '--cache-dir',
      '--checkpoint-dir',
    ]) {
      expect(help.out, flag).toContain(flag)
    }
    expect(help.out).not.toContain('--abort-after-calls')
    expect(
      normaliseArgv(
        [
          'search',
          '--dataset',
          'd.json',
          '--output=out/b.json',
          '--resume',
          's1',
          '--abort-after-calls=3',
          '--seed',
          '3',
        ],
        '/w',
      ),
    ).toEqual(['search', '--dataset', '/w/d.json', '--output=/w/out/b.json', '--seed', '3'])
  }, 30_000)

  it('takes the latest checkpoint by its number, never a temp file', async () => {
    const dir = join(work, 'ckpt-list')
    rmSync(dir, { recursive: true, force: true })
    mkdirSync(dir, { recursive: true })
    for (const name of [
      'state-0002.json',
      'state-0010.json',
      'state-0009.json',
      '.state-0011.json.123.ab.tmp',
      'state-0012.json.tmp',
      'notes.txt',
    ])
      writeFileSync(join(dir, name), '{}')
    expect((await listCheckpoints(dir)).map((entry) => entry.sequence)).toEqual([2, 9, 10])
  })
})

describe('(a) a mock search: output, run records, determinism, replay', () => {
  it('writes output and run records; same seed, same rubrics; the replay script reproduces them', async () => {
    const outA = join(work, 'a/out/best.json')
    const first = await cli([
      'search',
      '--dataset',
      'examples/demo.json',
      '--backend',
      'mock',
      '--output',
      outA,
      '--json',
    ])
    expect(first.err).toBe('')
    expect(first.code).toBe(0)
    const summary = JSON.parse(first.out)
    expect(summary).toMatchObject({ status: 'completed', output: outA, backend: { resolved: 'mock', judge: 'rank' } })

    const output = readJson(outA)
    expect(output.best_rubrics.map((entry: { prompt_id: string }) => entry.prompt_id)).toEqual([
      'p_debug_undefined',
      'p_math_trains',
      'p_policy_brief',
    ])
    for (const entry of output.best_rubrics) {
      expect(Object.keys(entry.candidate_scores)[0]).toBe(entry.best_candidate_id)
      expect(entry.rubric.criteria.length).toBeGreaterThan(0)
      expect(output.best_objective_scores[entry.prompt_id]).toBe(entry.score)
    }
    const manifest = output.run_manifest
    const datasetSha = (await import('node:crypto')).createHash('sha256').update(readFileSync(DEMO)).digest('hex')
    expect(manifest).toMatchObject({
      schema_version: '1.0',
      status: 'completed',
      dataset: { path: DEMO, sha256: datasetSha },
      output: { path: outA },
      backend: {
        requested: 'mock',
        resolved: 'mock',
        models: {
          initializer: 'mock-heuristic-1',
          proposer: 'mock-heuristic-1',
          verifier: 'mock-heuristic-1',
          judge: 'mock-heuristic-1',
        },
      },
      seed: 7,
      config_snapshot: SearchConfig.parse({}),
      runtime: { node_version: process.version },
      command: { normalized_argv: ['search', '--dataset', DEMO, '--backend', 'mock', '--output', outA, '--json'] },
      harness: { is_resumed: false },
    })
    expect(manifest.config_hash).toMatch(/^[0-9a-f]{16,}$/)
    expect(manifest.code_snapshot).toMatchObject({
      commit: expect.stringMatching(/^[0-9a-f]{40}$/),
      dirty: expect.any(Boolean),
    })
    // Usage per role: calls, cache hits and tokens; the verifier did the bulk, the rank judge needs no LLM.
    expect(output.usage.roles.verifier).toMatchObject({
      calls: expect.any(Number),
      cache_hits: 0,
      prompt_tokens: expect.any(Number),
    })
    expect(output.usage.roles.verifier.calls).toBeGreaterThan(0)
    expect(output.usage.roles.judge.calls).toBe(0)
    expect(output.usage.total.calls).toBe(output.usage.cache.misses)

    // Run records: the manifest (also embedded in the output) and an executable replay script.
    const records = join(work, 'a/out/run_records')
    expect(readJson(summary.run_records.manifest)).toEqual(manifest)
    expect(summary.run_records.manifest).toBe(join(records, `best_${manifest.run_id}.manifest.json`))
    const replay = summary.run_records.replay
    expect(replay).toBe(join(records, `best_${manifest.run_id}.replay.sh`))
    expect(statSync(replay).mode & 0o777).toBe(0o755)
    const script = readFileSync(replay, 'utf8')
    expect(script).toMatch(/^#!\/usr\/bin\/env bash\n/)
    expect(script).toContain('set -euo pipefail')
    expect(script).toContain(`cd ${ROOT}`)
    expect(script).toContain(
      `exec ./reward-harness search --dataset ${DEMO} --backend mock --output ${outA} --json "$@"`,
    )
    expect(script).not.toContain('API key')
    expect(
      readdirSync(join(work, 'a/out/checkpoints', summary.session_id)).some((name) => /^state-\d{4}\.json$/.test(name)),
    ).toBe(true)

    // The same seed again, into a fresh directory (fresh cache: every answer recomputed) → the same rubrics.
    const outB = join(work, 'b/out/best.json')
    const second = await cli([
      'search',
      '--dataset',
      'examples/demo.json',
      '--backend',
      'mock',
      '--output',
      outB,
      '--seed',
      '7',
    ])
    expect(second.code).toBe(0)
    expect(readJson(outB).usage.total.calls).toBe(output.usage.total.calls)
    expect(results(readJson(outB))).toEqual(results(output))

    // The replay script, run with bash from another directory, into yet another output directory.
    const elsewhere = mkdtempSync(join(work, 'replay-cwd-'))
    const outR = join(work, 'replay/out/best.json')
    const replayed = await new Promise<Run>((resolve) => {
      execFile(
        'bash',
        [replay, '--output', outR],
        { cwd: elsewhere, env: { ...process.env, NO_COLOR: '1' } },
        (error, stdout, stderr) =>
          resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, out: stdout, err: stderr }),
      )
    })
    expect(replayed.code, replayed.err).toBe(0)
    const replayedOutput = readJson(outR)
    expect(replayedOutput.usage.total.calls).toBe(output.usage.total.calls)
    expect(results(replayedOutput)).toEqual(results(output))
  }, 60_000)
})

describe('(b) interrupted and resumed = uninterrupted, no question asked twice', () => {
  let reference: { output: ReturnType<typeof readJson>; calls: number }
  beforeAll(async () => {
    const out = join(work, 'b-ref/best.json')
    const run = await cli(['search', '--dataset', DEMO, '--output', out, '--json'])
    expect(run.code).toBe(0)
    reference = { output: readJson(out), calls: JSON.parse(run.out).usage.total.calls }
  }, 30_000)

  it('stopped mid-generation (exactly as Ctrl-C) and resumed: the same output; backend calls add up to the ' +
    'uninterrupted run', async () => {
    const out = join(work, 'b-stop/best.json')
    const stopped = await cli(['search', '--dataset', DEMO, '--output', out, '--json', '--abort-after-calls', '200'])
    expect(stopped.code).toBe(130)
    const interrupted = JSON.parse(stopped.out)
    expect(interrupted).toMatchObject({ status: 'interrupted', interrupted_by: 'abort-after-calls', output: null })
    expect(interrupted.resume_command).toBe(
      `./reward-harness search --dataset ${DEMO} --output ${out} --json --resume ${interrupted.session_id}`,
    )
    expect(interrupted.checkpoints.latest).toMatch(/state-\d{4}\.json$/)
    expect(existsSync(out)).toBe(false)
    const callsBefore = interrupted.usage.total.calls
    expect(callsBefore).toBeGreaterThanOrEqual(200)
    expect(callsBefore).toBeLessThan(reference.calls)

    const resumed = await cli([
      'search',
      '--dataset',
      DEMO,
      '--output',
      out,
      '--json',
      '--resume',
      interrupted.session_id,
    ])
    expect(resumed.code, resumed.err).toBe(0)
    const summary = JSON.parse(resumed.out)
    expect(summary.resumed_from).toBe(interrupted.checkpoints.latest)
    expect(results(readJson(out))).toEqual(results(reference.output))
    // No question was sent to the backend twice: the two runs' calls add up to the uninterrupted run's, and the
    // answers given after the last checkpoint came back from the persisted cache.
    expect(callsBefore + summary.usage.total.calls).toBe(reference.calls)
    expect(summary.usage.total.cache_hits).toBeGreaterThan(0)
    expect(summary.usage.cache).toMatchObject({ loaded: callsBefore, misses: summary.usage.total.calls })
    const lines = cacheLines(join(work, 'b-stop/cache'))
    expect(lines).toHaveLength(reference.calls)
    expect(new Set(lines.map((line) => line.key)).size).toBe(reference.calls)
    expect(readJson(out).run_manifest.harness).toMatchObject({
      session_id: interrupted.session_id,
      is_resumed: true,
      resume_source: interrupted.checkpoints.latest,
    })
  }, 30_000)

  it('SIGINT after the first checkpoint: exit 130, the checkpoint kept, the resume command printed; resuming gives ' +
    'the same output', async () => {
    const out = join(work, 'b-sigint/best.json')
    const checkpoints = join(work, 'b-sigint/checkpoints')
    const child = spawn(
      process.execPath,
      [BIN, 'search', '--dataset', DEMO, '--output', out, '--mock-latency-ms', '15'],
      { cwd: ROOT, env: { ...process.env, NO_COLOR: '1' } },
    )
    let err = ''
    child.stderr.on('data', (chunk: Buffer) => void (err += chunk.toString()))
    const exited = new Promise<number>((resolve) => child.on('exit', (code) => resolve(code ?? -1)))
    const checkpointed = () =>
      existsSync(checkpoints) &&
      readdirSync(checkpoints).some((session) =>
        readdirSync(join(checkpoints, session)).some((name) => name.startsWith('state-')),
      )
    await vi.waitFor(() => expect(checkpointed(), 'no checkpoint appeared').toBe(true), {
      timeout: 20_000,
      interval: 20,
    })
    child.kill('SIGINT')
    expect(await exited).toBe(130)
    expect(err).toContain('SIGINT: stopping the search')
    const session = readdirSync(checkpoints)[0]!
    expect(err).toContain(
      `resume with:\n  ./reward-harness search --dataset ${DEMO} --output ${out} --resume ${session}`,
    )
    expect(readdirSync(join(checkpoints, session)).every((name) => /^state-\d{4}\.json$/.test(name))).toBe(true)

    const resumed = await cli(['search', '--dataset', DEMO, '--output', out, '--resume', session, '--json'])
    expect(resumed.code, resumed.err).toBe(0)
    expect(results(readJson(out))).toEqual(results(reference.output))
    const lines = cacheLines(join(work, 'b-sigint/cache'))
    expect(new Set(lines.map((line) => line.key)).size).toBe(lines.length)
    expect(lines).toHaveLength(reference.calls)
  }, 40_000)

  it('refuses to resume with another dataset or config (exit 2, saying what differs)', async () => {
    const out = join(work, 'b-stop/best.json')
    const session = readdirSync(join(work, 'b-stop/checkpoints'))[0]!
    const config = await cli(['search', '--dataset', DEMO, '--output', out, '--resume', session, '--generations', '3'])
    expect(config.code).toBe(2)
    expect(config.err).toContain('--resume: the search config differs from the checkpoint')
    expect(config.err).toContain('generations: 12 → 3')
    const dataset = await cli(['search', '--dataset', 'examples/pairs.jsonl', '--output', out, '--resume', session])
    expect(dataset.code).toBe(2)
    expect(dataset.err).toContain('--resume: the dataset differs from the checkpoint')
    const missing = await cli(['search', '--dataset', DEMO, '--output', out, '--resume', 'no_such_session'])
    expect(missing).toMatchObject({
      code: 2,
      err: expect.stringContaining('--resume no_such_session: no checkpoint file or session'),
    })
  }, 30_000)
})

// ---------------------------------------------------------------------------------------------
// (c) OpenAI-compatible stubs

/**
 * A loopback front of a stub that measures the chat requests in flight at it (arrival to the end of the answer,
 * answers held back a few ms so requests overlap), and, when `faultEvery` is set, scripts a fault for ~30% of them.
 */
async function frontOf(stub: LlmStub, options: { faults?: boolean } = {}) {
  const upstream = new URL(stub.baseUrl)
  const front = {
    inFlight: 0,
    peak: 0,
    chat: 0,
    faults: [] as StubFault['kind'][],
    url: '',
    server: undefined as unknown as Server,
  }
  const faults: StubFault[] = [{ kind: 'status', status: 429 }, { kind: 'status', status: 500 }, { kind: 'hang' }]
  front.server = createServer((req, res) => {
    const chat = req.method === 'POST'
    if (chat) {
      const index = front.chat++
      front.inFlight++
      front.peak = Math.max(front.peak, front.inFlight)
      res.on('close', () => front.inFlight--)
      // ~30%: requests 1, 4 and 7 of every 10.
      if (options.faults && [1, 4, 7].includes(index % 10)) {
        const fault = faults[front.faults.length % faults.length]!
        front.faults.push(fault.kind)
        stub.script(fault)
      }
    }
    const forward = httpRequest(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        const chunks: Buffer[] = []
        answer.on('data', (chunk: Buffer) => chunks.push(chunk))
        answer.on('end', () =>
          setTimeout(
            () => {
              if (res.destroyed) return
              res.writeHead(answer.statusCode ?? 502, answer.headers)
              res.end(Buffer.concat(chunks))
            },
            chat ? 3 + (front.chat % 7) * 2 : 0,
          ),
        )
      },
    )
    forward.on('error', () => res.destroy())
    res.on('close', () => forward.destroy())
    req.pipe(forward)
  })
  await new Promise<void>((resolve) => front.server.listen(0, '127.0.0.1', resolve))
  front.url = `http://127.0.0.1:${(front.server.address() as AddressInfo).port}/v1`
  return front
}

describe('(c) three OpenAI-compatible stubs, one failing ~30%', () => {
  const stubs: LlmStub[] = []
  const fronts: Awaited<ReturnType<typeof frontOf>>[] = []
  afterAll(async () => {
    for (const front of fronts) {
      front.server.closeAllConnections()
      await new Promise((resolve) => front.server.close(resolve))
    }
    await Promise.all(stubs.map((stub) => stub.close()))
  })

  it('completes within the caps, accounts for every request, and a repeat costs 0 calls', async () => {
    for (let i = 0; i < 3; i++) {
      const stub = await startLlmStub()
      stub.respondWith(searchResponder)
      stubs.push(stub)
      fronts.push(await frontOf(stub, { faults: i === 1 }))
    }
    // No labels: the LLM judge is used (both orders of each pair), so all four roles talk to the stubs.
    const demo = readJson(DEMO) as { prompts: Array<{ candidates: Array<{ metadata: unknown }> }> }
    const unlabelled = {
      prompts: demo.prompts.slice(0, 2).map((item) => ({
        ...item,
        candidates: item.candidates.slice(0, 4).map((candidate) => ({ ...candidate, metadata: {} })),
      })),
    }
    const dataset = join(work, 'c/unlabelled.json')
    mkdirSync(join(work, 'c'), { recursive: true })
    writeFileSync(dataset, JSON.stringify(unlabelled))
    const caps = [2, 3, 2]
    const out = join(work, 'c/out/best.json')
    const args = [
      'search',
      '--dataset',
      dataset,
      '--output',
      out,
      '--json',
      ...fronts.flatMap((front, i) => ['--endpoint', `${front.url},max_concurrency=${caps[i]}`]),
      '--api-key-env',
      'STUB_KEY',
      '--model',
      'stub-model',
      '--model-judge',
      'stub-judge',
      '--generations',
      '2',
      '--population-size',
      '4',
      '--mutations-per-round',
      '2',
      '--concurrency',
      '12',
      '--timeout-ms',
      '1000',
    ]
    const first = await cli(args, { env: { STUB_KEY: 'sk-stub' } })
    expect(first.code, first.err).toBe(0)
    const summary = JSON.parse(first.out)
    expect(summary).toMatchObject({
      status: 'completed',
      backend: { resolved: 'openai', judge: 'llm', models: { verifier: 'stub-model', judge: 'stub-judge' } },
    })
    const firstOutput = readJson(out)
    const usage = firstOutput.usage
    const received = stubs.map((stub) => stub.requests.length)

    // Faults happened on the flaky endpoint and were retried; every role talked to the stubs.
    expect(fronts[1]!.faults.length).toBeGreaterThan(0)
    expect(fronts[1]!.faults).toContain('hang')
    for (const role of ['initializer', 'proposer', 'verifier', 'judge'])
      expect(usage.roles[role].calls, role).toBeGreaterThan(0)
    expect(usage.total.retries).toBeGreaterThan(0)
    expect(usage.total.failures.timeout).toBeGreaterThan(0)

    // Caps: never exceeded, by the pool's own count nor measured at the servers.
    fronts.forEach((front, i) => {
      const endpoint = usage.endpoints[front.url]
      expect(endpoint.max_concurrency).toBe(caps[i])
      expect(endpoint.peak_outstanding).toBeLessThanOrEqual(caps[i]!)
      expect(front.peak, `measured at endpoint ${i}`).toBeLessThanOrEqual(caps[i]!)
      expect(front.peak).toBeGreaterThan(0)
      // Every request a server received is accounted for, per endpoint and in total.
      expect(endpoint.calls, `endpoint ${i}`).toBe(received[i])
    })
    expect(usage.total.attempts).toBe(received.reduce((sum, count) => sum + count, 0))
    expect(usage.total.attempts).toBe(usage.total.calls + usage.total.retries)
    expect(usage.total.calls).toBe(usage.cache.misses)
    // The judge's requests went to its own model; no request carried a key other than the one named.
    expect(
      stubs
        .flatMap((stub) => stub.requests)
        .filter((body) => roleOf(body) === 'judge')
        .every((body) => body.model === 'stub-judge'),
    ).toBe(true)
    expect(
      stubs
        .flatMap((stub) => stub.requests)
        .filter((body) => roleOf(body) === 'verifier')
        .every((body) => body.model === 'stub-model'),
    ).toBe(true)
    expect(stubs.flatMap((stub) => stub.authorizations).every((header) => header === 'Bearer sk-stub')).toBe(true)
    expect(JSON.stringify(readJson(out).run_manifest)).not.toContain('sk-stub')
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell parameter expansion in the replay script
    expect(readFileSync(summary.run_records.replay, 'utf8')).toContain('if [ -z "${STUB_KEY:-}" ]; then')

    // The same run again: every question is answered by the cache, no request reaches a server.
    const second = await cli(args, { env: { STUB_KEY: 'sk-stub' } })
    expect(second.code, second.err).toBe(0)
    const again = JSON.parse(second.out).usage
    expect(again.total).toMatchObject({ calls: 0, attempts: 0, cache_hits: usage.total.requests })
    expect(stubs.map((stub) => stub.requests.length)).toEqual(received)
    expect(results(readJson(out))).toEqual(results(firstOutput))
  }, 60_000)
})

describe('(c2) a proposer that returns its parent unchanged until told', () => {
  let stub: LlmStub
  afterAll(() => stub?.close())

  it('counts each refused reply, keeps none in the cache, and a rerun asks only those questions again', async () => {
    stub = await startLlmStub()
    // What a small model at temperature 0 writes as the proposer: the current rubric, verbatim, until the request
    // says the reply was refused.
    let unchanged = 0
    stub.respondWith((body) => {
      const user = String(body.messages.find((message) => message.role === 'user')?.content ?? '')
      if (roleOf(body) !== 'proposer' || /^That reply was refused/.test(String(body.messages.at(-1)!.content)))
        return searchResponder(body)
      unchanged++
      const current = user.slice(user.indexOf('The current rubric:\n') + 20, user.indexOf('\n\nThe data blocks below'))
      return JSON.stringify({ rubric: JSON.parse(current) })
    })
    const out = join(work, 'c2/out/best.json')
    const args = [
      ...['search', '--dataset', DEMO, '--output', out, '--json', '--endpoint', stub.baseUrl, '--model', 'stub'],
      ...['--generations', '1', '--population-size', '2', '--mutations-per-round', '1', '--batch-size', '1'],
      ...['--mutation-parent-count', '1'],
    ]
    const first = await cli(args)
    expect(first.code, first.err).toBe(0)
    const usage = readJson(out).usage
    expect(unchanged).toBeGreaterThan(0)
    expect(usage.roles.proposer.invalid_replies).toBe(unchanged)
    expect(usage.total.invalid_replies).toBe(unchanged)
    // Every proposal came through: each refused question was followed by its correction.
    expect(readJson(out).search_diagnostics.dropped_prompts).toEqual([])

    const refused = unchanged
    const second = await cli(args)
    expect(second.code, second.err).toBe(0)
    // The refused replies were evicted: those questions reach the model again (and are refused again); every other
    // answer, the corrections included, comes from the cache.
    expect(JSON.parse(second.out).usage.total.calls).toBe(refused)
    expect(unchanged).toBe(2 * refused)
  }, 60_000)
})

describe('(d) bad input: exit code 2 and the place named', () => {
  it('refuses broken datasets, naming the place', async () => {
    const demo = readFileSync(DEMO, 'utf8')
    const edit = (
      change: (value: {
        prompts: Array<Record<string, unknown> & { candidates: Array<Record<string, unknown>> }>
      }) => void,
    ) => {
      const value = JSON.parse(demo)
      change(value)
      return JSON.stringify(value, null, 2)
    }
    // Without the comma after p_debug_undefined's prompt_id, the next line is where the JSON breaks.
    const brokenLine = demo.split('\n').findIndex((line) => line.includes('"prompt_id": "p_debug_undefined",')) + 2
    const cases: Array<[string, string, string]> = [
      [
        'one-candidate.json',
        edit((value) => void (value.prompts[0]!.candidates = value.prompts[0]!.candidates.slice(0, 1))),
        'prompts[0] (prompt_id "p_policy_brief").candidates: needs at least 2 candidates, got 1',
      ],
      [
        'missing-id.json',
        edit((value) => void delete value.prompts[1]!.candidates[2]!.candidate_id),
        'prompts[1] (prompt_id "p_debug_undefined").candidates[2].candidate_id: required',
      ],
      [
        'missing-prompt-id.json',
        edit((value) => void delete value.prompts[2]!.prompt_id),
        'prompts[2].prompt_id: required',
      ],
      [
        'duplicate-candidates.json',
        edit(
          (value) =>
            void (value.prompts[1]!.candidates[3]!.candidate_id = value.prompts[1]!.candidates[0]!.candidate_id),
        ),
        'prompts[1] (prompt_id "p_debug_undefined").candidates[3] (candidate_id "debug-a").candidate_id: ' +
          'duplicate of candidates[0]',
      ],
      [
        'duplicate-prompts.json',
        edit((value) => void (value.prompts[2]!.prompt_id = value.prompts[0]!.prompt_id)),
        'prompts[2] (prompt_id "p_policy_brief").prompt_id: duplicate of prompts[0]',
      ],
      [
        'broken.json',
        demo.replace('"prompt_id": "p_debug_undefined",', '"prompt_id": "p_debug_undefined"'),
        `line ${brokenLine}: not valid JSON`,
      ],
    ]
    const dir = join(work, 'd')
    mkdirSync(dir, { recursive: true })
    const runs = await Promise.all(
      cases.map(([name, text]) => {
        writeFileSync(join(dir, name), text)
        return cli(['search', '--dataset', join('d', name), '--output', 'out/best.json'], { cwd: work })
      }),
    )
    runs.forEach((run, index) => {
      const [name, , place] = cases[index]!
      expect(run.code, name).toBe(2)
      expect(run.err, name).toContain(`d/${name}: ${place}`)
      expect(run.out).toBe('')
    })
    expect(existsSync(join(work, 'out'))).toBe(false)
    const missing = await cli(['search', '--dataset', 'd/none.json', '--output', 'out/best.json'], { cwd: work })
    expect(missing).toMatchObject({ code: 2, err: 'error: d/none.json: no such file\n' })
  }, 30_000)

  it('refuses bad flags and config files, naming the flag or the file and key (in process)', async () => {
    writeFileSync(join(work, 'bad-config.json'), JSON.stringify({ generations: 0, populaton_size: 4 }))
    writeFileSync(join(work, 'config.json'), JSON.stringify({ generations: 0 }))
    const base = ['search', '--dataset', DEMO, '--output', join(work, 'flags/best.json')]
    const run = async (...argv: string[]) => {
      let out = ''
      let err = ''
      const code = await main(argv, { out: (text) => void (out += text), err: (text) => void (err += text) })
      return { code, out, err }
    }
    expect(await run(...base, '--generations', 'ten')).toMatchObject({
      code: 2,
      err: expect.stringContaining("option '--generations <n>' argument 'ten' is invalid"),
    })
    expect(await run(...base, '--tail-fraction', '1.5')).toMatchObject({
      code: 2,
      err: expect.stringContaining('--tail-fraction: '),
    })
    expect(await run(...base, '--locale', 'fr')).toMatchObject({
      code: 2,
      err: expect.stringContaining("option '--locale <locale>' argument 'fr' is invalid"),
    })
    expect(await run(...base, '--extraction', 'regex')).toMatchObject({
      code: 2,
      err: expect.stringContaining('--extraction regex needs --extraction-pattern'),
    })
    expect(await run(...base, '--config', join(work, 'bad-config.json'))).toMatchObject({
      code: 2,
      err: expect.stringContaining('unknown key "populaton_size"'),
    })
    expect(await run(...base, '--config', join(work, 'config.json'))).toMatchObject({
      code: 2,
      err: expect.stringContaining(`${join(work, 'config.json')}: generations: `),
    })
    expect(await run(...base, '--endpoint', 'http://127.0.0.1:9/v1,max_concurrency=0')).toMatchObject({
      code: 2,
      err: expect.stringContaining('max_concurrency: at least 1'),
    })
    expect(JSON.parse((await run(...base, '--backend', 'openai', '--json')).err)).toEqual({
      error: {
        kind: 'bad_input',
        code: 'usage',
        message: '--backend openai needs --endpoint, --endpoints-file or --base-url',
      },
    })
    const key = await run(
      ...base,
      '--base-url',
      'http://127.0.0.1:9/v1',
      '--api-key-env',
      'SEARCH_CLI_TEST_UNSET',
      '--model',
      'm',
    )
    expect(key).toMatchObject({
      code: 2,
      err: expect.stringContaining('--api-key-env: the environment variable SEARCH_CLI_TEST_UNSET'),
    })
    expect(await run(...base, '--output', join(work, 'flags/best.txt'))).toMatchObject({
      code: 2,
      err: expect.stringContaining('--output: the search output is JSON'),
    })
    expect(existsSync(join(work, 'flags'))).toBe(false)
  })

  it('lets flags override the --config file', async () => {
    const overridden = await cli([
      'search',
      '--dataset',
      DEMO,
      '--output',
      join(work, 'flags/best.json'),
      '--config',
      join(work, 'config.json'),
      '--generations',
      '1',
      '--json',
    ])
    expect(overridden.code, overridden.err).toBe(0)
    expect(readJson(join(work, 'flags/best.json')).run_manifest.config_snapshot).toMatchObject({
      generations: 1,
      population_size: 8,
    })
  }, 30_000)
})
